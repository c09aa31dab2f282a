import { CancellationScope, sleep } from '@temporalio/workflow';

/**
 * Runs past the worker's execution timeout in a workflow task, inside a cancellation scope (the
 * SDK keeps the scope in an AsyncLocalStorage) and after a timer (in a microtask), as a task of a
 * worker paused mid-activation does when it resumes.
 */
export async function outlivesExecutionTimeout(spinIterations: number): Promise<number> {
  await sleep(1);
  return CancellationScope.cancellable(async () => {
    await sleep(1);
    let sum = 0;
    for (let i = 0; i < spinIterations; i++) sum += i % 7;
    return sum;
  });
}
