import { randomUUID } from 'node:crypto';

/**
 * A valid `docauth.completed` data object (section 6.2), with `overrides` on top: what the
 * tests, the fault suite and the benchmark publish.
 */
export function docauthData(overrides: Record<string, unknown> = {}) {
  return {
    request_id: `req-${randomUUID()}`,
    session_id: 'sess-1',
    result: 'pass',
    docauth_info: {
      document_type: 'passport',
      country_code: 'GBR',
      first_name: 'Zoë',
      last_name: 'Kowalski-Smith',
      birth_date: '1990-04-01',
      expiry_date: '2031-12-31',
      document_number: 'X1234567',
      current_result: 'Passed',
    },
    processed_at: '2026-11-22T10:00:00Z',
    scores_applied: true,
    ...overrides,
  };
}
