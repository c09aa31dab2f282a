/**
 * `--alongside "<command>"`: a shell command started with the load window (for example the
 * retention sweep, `npm run cli -- retention run --older-than 50d`), so its effect on delivery
 * latency shows in the same run: deliveries published while it ran are summarised apart.
 */
import { spawn } from 'node:child_process';
import { now } from './output.ts';
import { REPO_ROOT } from './stack.ts';
import { percentiles } from './stats.ts';

/** The command's run, as the result file records it. */
export interface AlongsideRun {
  command: string;
  /** Seconds after the load window opened, and how long it ran. */
  started_s: number;
  seconds: number;
  exit: number | null;
  /** The end of its output (a --json report, for example). */
  output: string;
}

/** Starts `command` in the project folder, with this environment (DATABASE_URL included). */
export function startAlongside(command: string, loadStart: number) {
  const startedAt = now();
  const child = spawn('sh', ['-c', command], { cwd: REPO_ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let endedAt: number | undefined;
  const done = new Promise<AlongsideRun>((resolve) => {
    child.once('exit', (code) => {
      endedAt = now();
      resolve({ command, started_s: (startedAt - loadStart) / 1000, seconds: (endedAt - startedAt) / 1000, exit: code, output: output.trim() });
    });
  });
  return {
    done,
    /** Latency of the deliveries published while the command ran, and of the others. */
    split(landings: Array<{ t: number; latency: number }>) {
      const during = (l: { t: number; latency: number }) => {
        const published = l.t - l.latency;
        return published >= startedAt && published <= (endedAt ?? Infinity);
      };
      return {
        while_running: { deliveries: landings.filter(during).length, ...percentiles(landings.filter(during).map((l) => l.latency)) },
        otherwise: { deliveries: landings.filter((l) => !during(l)).length, ...percentiles(landings.filter((l) => !during(l)).map((l) => l.latency)) },
      };
    },
  };
}
