import { DrizzleQueryError } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';

it("leaves a failed query's parameters out of its logged error, and keeps its query and cause", () => {
  const lines: string[] = [];
  const logger = createLogger('info', {}, { write: (line: string) => void lines.push(line) });
  const url = 'https://hooks.example.com/in?token=s3cr3t';
  const error = new DrizzleQueryError('insert into "webhooks" ("url") values ($1)', [url], new Error('duplicate key value violates unique constraint'));
  logger.error({ err: error }, 'unhandled error');
  expect(lines).toHaveLength(1);
  expect(lines[0]).not.toContain('s3cr3t');
  const logged = JSON.parse(lines[0]!).err;
  expect(logged.message).toBe('Failed query: insert into "webhooks" ("url") values ($1)');
  expect(logged.stack).toContain('Failed query: insert into "webhooks"');
  expect(JSON.stringify(logged.cause ?? logged)).toContain('duplicate key value');

  logger.error({ err: new Error('plain') }, 'other');
  expect(JSON.parse(lines[1]!).err).toMatchObject({ type: 'Error', message: 'plain' });
});
