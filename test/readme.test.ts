import { mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  embeddedEnv,
  freePorts,
  killStarted,
  lastLines,
  startGroup,
  waitForExit,
  type GroupProcess,
} from './support/embedded-service.ts';
import { portIsFree } from '../src/local/cluster/processes.ts';
import { readmeCommands, runToEnd } from './support/readme.ts';
import { deadlineIn } from './support/wait.ts';

/*
 * The README's first delivery, run as written: its commands are read from README.md, in order,
 * in a copy of the checkout without `.data` (a fresh checkout after `npm ci`). Only the
 * service's ports are moved, with the variables a user would set, so that the suite's other
 * servers do not collide with it.
 */

const projectRoot = path.resolve(import.meta.dirname, '..');
const MAX_COMMANDS = 5;
/** The port `listen` takes when none is given: the README does not give one. */
const LISTEN_PORT = 4443;

/** Commands that run until Ctrl-C, and what each prints once it is ready. */
const RUNS_UNTIL_STOPPED = [
  { command: /\bnpm start$/, ready: /^Webhook delivery service is running\.$/m, receives: false },
  { command: /\blisten --create-webhook\b/, ready: /^Listening on https:/m, receives: true },
];

/** A directory with every file of the checkout but `.data`, `.git` and build output. */
async function freshCheckout(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'readme-checkout-'));
  for (const entry of await readdir(projectRoot)) {
    if (['.data', '.git', 'dist', 'coverage'].includes(entry)) continue;
    await symlink(path.join(projectRoot, entry), path.join(dir, entry));
  }
  return dir;
}

async function waitForOutput(group: GroupProcess, pattern: RegExp, what: string, timeoutMs = 120_000): Promise<void> {
  const deadline = deadlineIn(timeoutMs);
  let exited = false;
  void group.exited.then(() => (exited = true));
  while (!pattern.test(group.output())) {
    if (exited || deadline.passed()) {
      throw new Error(`${what} ${exited ? 'exited' : 'did not print'} ${pattern}:\n${lastLines(group.output())}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Waits until no process of the group is left: npm returns before the command it ran has finished. */
async function waitUntilGone(group: GroupProcess, timeoutMs = 30_000): Promise<void> {
  const deadline = deadlineIn(timeoutMs);
  for (;;) {
    try {
      process.kill(-group.child.pid!, 0);
    } catch {
      return;
    }
    if (deadline.passed()) throw new Error(`a process of \`${group.child.spawnargs.join(' ')}\` is still running`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

let checkout: string;

beforeAll(async () => {
  checkout = await freshCheckout();
});
afterEach(killStarted);
afterAll(async () => {
  await rm(checkout, { recursive: true, force: true });
});

// The first delivery uses the embedded defaults whatever the suite's database is: it runs once,
// in the suite's run without DATABASE_URL (PGlite).
describe.skipIf(process.env.DATABASE_URL !== undefined)("the README's first delivery", () => {
  it(
    'shows a delivery with a verified signature within five commands, on a fresh checkout',
    async () => {
      const commands = await readmeCommands('## A first delivery');
      expect(commands.length).toBeGreaterThan(0);
      expect(commands.length).toBeLessThanOrEqual(MAX_COMMANDS);
      expect(await portIsFree(LISTEN_PORT), `listen needs 127.0.0.1:${LISTEN_PORT}`).toBe(true);

      let env = embeddedEnv(undefined, await freePorts());
      const running: GroupProcess[] = [];
      let listener: GroupProcess | undefined;
      for (const command of commands) {
        const longRunning = RUNS_UNTIL_STOPPED.find((entry) => entry.command.test(command));
        if (!longRunning) {
          env = (await runToEnd(command, env, checkout)).env;
          continue;
        }
        const group = startGroup('bash', ['-c', command], env, checkout);
        running.push(group);
        if (longRunning.receives) listener = group;
        await waitForOutput(group, longRunning.ready, `\`${command}\``);
      }

      expect(listener, 'the README runs no listener').toBeDefined();
      await waitForOutput(listener!, /^ {2}signature: verified$/m, 'the listener', 60_000);
      expect(listener!.output()).toMatch(/POST \/ {2}docauth\.completed {2}dlv_\w+ {2}→ 200/);

      // Ctrl-C, as in the terminals: the listener first, which deletes its webhook, then the service.
      process.kill(-listener!.child.pid!, 'SIGINT');
      await waitForExit(listener!);
      await waitUntilGone(listener!);
      const webhooks = await fetch(`http://127.0.0.1:${env.PORT}/api-gateway/v2/webhooks`, {
        headers: { Authorization: `Bearer ${env.WEBHOOKS_API_TOKEN}` },
      });
      expect(((await webhooks.json()) as { data: unknown[] }).data).toEqual([]);
      const service = running.find((group) => group !== listener)!;
      process.kill(-service.child.pid!, 'SIGINT');
      await waitForExit(service);
      await waitUntilGone(service);
      expect(service.output()).toMatch(/"msg":"stopped"/);
    },
    180_000,
  );
});
