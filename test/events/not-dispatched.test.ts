/**
 * An event stored but not dispatched says why, whatever its cause threw: the CLI and the API's
 * logs quote its reason, which must not assume the cause is an Error.
 */
import { describe, expect, it } from 'vitest';
import { EventNotDispatchedError } from '../../src/events/publish.ts';

const event = { eventId: 'evt_1', deliveryIds: ['dlv_1', 'dlv_2'], created: true };

describe('EventNotDispatchedError', () => {
  it("quotes an Error cause's message and keeps the cause", () => {
    const cause = new Error('namespace not found: no-such-namespace');
    const error = new EventNotDispatchedError(event, cause);
    expect(error.reason).toBe('namespace not found: no-such-namespace');
    expect(error.message).toBe('event evt_1 is stored, but publishing it did not finish: namespace not found: no-such-namespace');
    expect(error.cause).toBe(cause);
    expect(error.event).toEqual(event);
  });

  it('quotes a cause that is not an Error as text', () => {
    expect(new EventNotDispatchedError(event, 'deadline exceeded').reason).toBe('deadline exceeded');
    expect(new EventNotDispatchedError(event, undefined).message).toBe('event evt_1 is stored, but publishing it did not finish: undefined');
  });
});
