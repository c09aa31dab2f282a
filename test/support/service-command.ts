import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The node flags the npm scripts run the service with (`start`, `api`, `worker`: the heap
 * limit and the TypeScript loader), read from package.json, the one place they are written,
 * so that tests and the benchmark run the service exactly as `npm start` does; those of the
 * checkout in `root` (an earlier release's) when given.
 */
export function serviceNodeFlags(root = path.resolve(import.meta.dirname, '../..')): string[] {
  const { scripts } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const match = /exec node (.*?) src\/main\.ts/.exec(scripts['start'] ?? '');
  if (!match) throw new Error('package.json: the start script does not run `exec node <flags> src/main.ts`');
  return match[1]!.split(' ');
}
