import { randomUUID } from 'node:crypto';

/**
 * A valid `docauth.completed` data object (section 6.2), with `overrides` on top: what the
 * tests, the fault suite and the benchmark publish. Every personal text carries a tag of its own,
 * so a test that asserts the data never shows up in logs, histories or rows cannot fail because a
 * short value such as a country code happens to occur inside some random base64.
 */
export function docauthData(overrides: Record<string, unknown> = {}) {
  const tag = randomUUID().slice(0, 8);
  return {
    request_id: `req-${randomUUID()}`,
    session_id: 'sess-1',
    result: 'pass',
    docauth_info: {
      document_type: `passport-${tag}`,
      country_code: `GBR-${tag}`,
      first_name: `Zoë-${tag}`,
      last_name: `Kowalski-Smith-${tag}`,
      birth_date: '1990-04-01',
      expiry_date: '2031-12-31',
      document_number: `X-${tag}`,
      current_result: `Passed-${tag}`,
    },
    processed_at: '2026-11-22T10:00:00Z',
    scores_applied: true,
    ...overrides,
  };
}
