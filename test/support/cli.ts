import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const projectRoot = path.resolve(import.meta.dirname, '../..');
const CLI = ['--import', './scripts/typescript.mjs', 'src/cli/index.ts'];

/** How a CLI run ended. */
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of a CLI child: this process's, without DATABASE_URL unless `env` sets it, quiet logs. */
function cliEnvironment(env: Record<string, string>): NodeJS.ProcessEnv {
  const { DATABASE_URL: _ignored, ...rest } = process.env;
  return { ...rest, LOG_LEVEL: 'silent', ...env };
}

/**
 * Runs `npm run cli -- <args>` as a child process (asynchronously: the database it talks to
 * may be served by this test process) and returns its exit code and output.
 */
export function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI, ...args], { cwd: projectRoot, env: cliEnvironment(env), timeout: 120_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

/** Starts `npm run cli -- <args>` and returns the child, for tests that kill it. */
export function spawnCli(args: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [...CLI, ...args], { cwd: projectRoot, env: cliEnvironment(env), stdio: ['ignore', 'pipe', 'pipe'] });
}
