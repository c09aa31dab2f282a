import { randomUUID } from 'node:crypto';
import type { PublishEventInput } from './schema.ts';

/**
 * A sample `docauth.completed` payload for test events: a passing check of a made-up
 * document, its `request_id` prefixed `test_` so receivers can tell it from real ones.
 */
export function sampleDocauthCompleted(now: Date = new Date()): PublishEventInput['data'] {
  return {
    request_id: `test_${randomUUID()}`,
    result: 'pass',
    docauth_info: {
      document_type: 'passport',
      country_code: 'UTO',
      first_name: 'Jane',
      last_name: 'Sample',
      expiry_date: `${now.getUTCFullYear() + 5}-01-31`,
      document_number: 'TEST0000',
      current_result: 'pass',
    },
    processed_at: now.toISOString(),
    scores_applied: false,
  };
}
