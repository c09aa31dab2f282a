import { Client, Connection } from '@temporalio/client';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import type { DevServer } from '../../src/local/dev-server.ts';
import { startOwnDevServer } from '../support/dev-server.ts';
import { serviceNodeFlags } from '../support/service-command.ts';
import { waitFor } from '../support/wait.ts';

/*
 * A worker paused (SIGSTOP, a frozen VM) in the middle of a workflow activation finds, when it
 * resumes, that the activation has outlived the SDK's execution timeout (5 s): the vm's
 * watchdog, counting wall time, cuts it. The runtime must fail that workflow task and go on.
 * Node 20 and 22, whose AsyncLocalStorage rides on async hooks, abort the whole process instead
 * ("async hook stack has become corrupted"), taking every send of the replica down with it: the
 * production topology's replicas must run a Node that passes this test (the image's Node 26 does).
 */

/** Far longer than the 5 s the SDK gives an activation: only the timeout ends it. */
const SPIN_ITERATIONS = 1e13;
const { namespace } = parseConfig(process.env).temporal;
const TASK_QUEUE = 'execution-timeout';
let server: DevServer;
let worker: ChildProcess;
let output = '';
let exited: string | undefined;

beforeAll(async () => {
  server = await startOwnDevServer();
  const script = path.join(import.meta.dirname, 'execution-timeout/worker.ts');
  worker = spawn(process.execPath, [...serviceNodeFlags(), script, server.address, TASK_QUEUE, namespace], { stdio: ['ignore', 'pipe', 'pipe'] });
  worker.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  worker.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  worker.on('exit', (code, signal) => (exited = `exited (${code ?? signal})`));
  await waitFor('the worker to poll, or to exit', () => exited !== undefined || output.includes('ready'), { timeoutMs: 120_000, intervalMs: 100 });
  if (exited) throw new Error(`the worker ${exited} before it polled:\n${output}`);
}, 180_000);

afterAll(async () => {
  worker?.kill('SIGKILL');
  await server?.stop();
});

it('a workflow task cut by the execution timeout fails, and the worker process lives on to run the next', async () => {
  const connection = await Connection.connect({ address: server.address });
  try {
    const client = new Client({ connection, namespace });
    const handle = await client.workflow.start('outlivesExecutionTimeout', {
      taskQueue: TASK_QUEUE,
      workflowId: `execution-timeout-${Date.now()}`,
      args: [SPIN_ITERATIONS],
    });
    const outcome = await waitFor('two workflow tasks cut by the timeout, or the worker gone', async () => {
      if (exited) return { exited };
      const history = await handle.fetchHistory();
      const failed = history.events!.filter((event) => event.workflowTaskFailedEventAttributes);
      return failed.length >= 2 && { failed };
    }, { timeoutMs: 90_000, intervalMs: 250 });
    const lastOutput = output.split('\n').slice(-20).join('\n');
    const aborted = `Node ${process.version} aborted the worker (run the fault suite on Node 24 or later, as CI does with .tools/node-26); its last output:\n${lastOutput}`;
    expect(exited, aborted).toBeUndefined();
    expect(outcome.failed![0]!.workflowTaskFailedEventAttributes!.failure!.message).toMatch(/timed out/);
    await handle.terminate('test done');
  } finally {
    await connection.close();
  }
}, 120_000);
