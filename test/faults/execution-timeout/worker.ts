/**
 * A worker process for the execution-timeout test: runs `outlivesExecutionTimeout` on the
 * task queue in argv[3] of the server at argv[2] (namespace argv[4]), with the SDK's execution
 * timeout as the service's worker has it (5 s), and prints `ready` once it runs.
 */
import { NativeConnection, Worker, bundleWorkflowCode, DefaultLogger, Runtime } from '@temporalio/worker';
import path from 'node:path';

const [address, taskQueue, namespace] = process.argv.slice(2) as [string, string, string];
Runtime.install({ logger: new DefaultLogger('WARN') });
const connection = await NativeConnection.connect({ address });
const worker = await Worker.create({
  connection,
  namespace,
  taskQueue,
  workflowBundle: await bundleWorkflowCode({ workflowsPath: path.join(import.meta.dirname, 'workflows.ts'), logger: new DefaultLogger('WARN') }),
});
const running = worker.run();
await new Promise((resolve) => setTimeout(resolve, 100));
console.log('ready');
await running;
