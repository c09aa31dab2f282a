import { OpenAPIHono, type Hook } from '@hono/zod-openapi';
import type { ZodError } from 'zod';
import type { AppEnv } from './env.ts';
import { ApiError } from './errors.ts';

/** One line per problem: the field's path and the rule it breaks. */
export function describeZodError(error: ZodError, target?: string): string {
  return error.issues
    .map((issue) => {
      const field = issue.path.map(String).join('.');
      if (issue.code === 'unrecognized_keys') {
        const where = field ? ` in ${field}` : '';
        return `unknown field${issue.keys.length > 1 ? 's' : ''}${where}: ${issue.keys.join(', ')}`;
      }
      const message = issue.code === 'invalid_type' && /received undefined$/.test(issue.message) ? 'is required' : issue.message;
      return field ? `${field}: ${message}` : `${target ? `${target} ` : ''}${message}`;
    })
    .join('; ');
}

const throwInvalidRequest: Hook<unknown, AppEnv, string, unknown> = (result) => {
  if (!result.success) {
    const target = result.target === 'json' ? 'body' : result.target;
    throw new ApiError('invalid_request', describeZodError(result.error as ZodError, target));
  }
};

/** A router whose request validation failures become 400 `invalid_request`. */
export const createRouter = () => new OpenAPIHono<AppEnv>({ defaultHook: throwInvalidRequest });
