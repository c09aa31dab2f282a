import { readFileSync } from 'node:fs';

/**
 * The node flags the npm scripts run the service with (`start`, `api`, `worker`: the heap
 * limit and the TypeScript loader), read from package.json, the one place they are written,
 * so that tests and the benchmark run the service exactly as `npm start` does.
 */
export function serviceNodeFlags(): string[] {
  const { scripts } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const match = /exec node (.*?) src\/main\.ts/.exec(scripts['start'] ?? '');
  if (!match) throw new Error('package.json: the start script does not run `exec node <flags> src/main.ts`');
  return match[1]!.split(' ');
}
