import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { projectRoot } from '../../src/local/go-tools.mjs';
import { nodeArgsForChild } from '../../src/node-child.ts';

/*
 * The compose test's commands run as child processes it awaits, never synchronously: what takes
 * minutes on a new machine (Go builds, Debian root file systems, `docker compose up --build`)
 * would block the test worker's event loop, and a worker that does not answer the test runner for
 * a minute fails the run ("Timeout calling onTaskUpdate"), however well its tests went.
 */

/**
 * Runs `command` to its end, stdin closed as in a user's shell script; answers what it printed on
 * stdout. Its stderr is collected for the error it fails with, or passed to the test's own with
 * `stderr: 'inherit'` (progress worth seeing in the log).
 */
export function output(command: string, args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string; stderr?: 'pipe' | 'inherit' }): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: options.env, cwd: options.cwd, stdio: ['ignore', 'pipe', options.stderr ?? 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${command} ${args.join(' ')} failed (${signal ?? `exit ${code}`})${stderr ? `:\n${stderr}` : ''}`)),
    );
  });
}

/** Runs the TypeScript `file` as a program with `args`, in `env`, its stderr the test's; answers what it printed on stdout. */
export function runProgram(file: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return output(process.execPath, [...nodeArgsForChild(), file, ...args], { env, cwd: projectRoot, stderr: 'inherit' });
}

/** Whether the module at `moduleUrl` was started as the program (`node … file`), not imported. */
export function isProgram(moduleUrl: string): boolean {
  return Boolean(process.argv[1]) && moduleUrl === pathToFileURL(process.argv[1]!).href;
}
