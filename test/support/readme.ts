import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

/*
 * The README's commands, read from README.md and run as a user runs them, by the tests of its
 * first delivery and of its Docker Compose path.
 */

const projectRoot = path.resolve(import.meta.dirname, '..', '..');

/**
 * The shell commands of the README's section under `heading` (a whole heading line, such as
 * `## A first delivery`), up to its next heading, one per non-empty line of its `sh` blocks.
 */
export async function readmeCommands(heading: string): Promise<string[]> {
  const readme = await readFile(path.join(projectRoot, 'README.md'), 'utf8');
  const start = readme.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`README.md has no "${heading}" section`);
  const section = readme.slice(start + heading.length + 2).split(/\n#{2,3} /)[0]!;
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].flatMap((block) => block[1]!.split('\n').filter((line) => line.trim() !== ''));
}

/**
 * Runs one command to its end in bash, in `cwd`; answers what it printed and the environment it
 * leaves (its `export`s), for the next command.
 */
export function runToEnd(command: string, env: NodeJS.ProcessEnv, cwd: string, timeoutMs = 60_000): Promise<{ stdout: string; env: NodeJS.ProcessEnv }> {
  const marker = '\0environment\0';
  return new Promise((resolve, reject) => {
    execFile('bash', ['-ec', `${command}\nprintf '\\0environment\\0'; env -0`], { cwd, env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`\`${command}\` failed (${error.message}):\n${stdout}\n${stderr}`));
      const end = stdout.lastIndexOf(marker);
      const pairs = stdout.slice(end + marker.length).split('\0').filter(Boolean);
      resolve({
        stdout: stdout.slice(0, end),
        env: Object.fromEntries(pairs.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)])),
      });
    });
  });
}
