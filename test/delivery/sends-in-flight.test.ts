/** The worker's room for sends in its background (WORKER_MAX_SENDS_IN_FLIGHT), and a wait for it given up. */
import { expect, it } from 'vitest';
import { SendsInFlight } from '../../src/delivery/sends-in-flight.ts';

/** A send run in the background that ends when the returned function is called. */
function runUntilEnded(admission: NonNullable<Awaited<ReturnType<SendsInFlight['admit']>>>): () => void {
  let end!: () => void;
  admission.run(() => new Promise<void>((resolve) => (end = resolve)));
  return end;
}

it('a wait for room given up (its signal aborted) takes no room, and the room goes to the next in line', async () => {
  const sends = new SendsInFlight(1);
  const endFirst = runUntilEnded((await sends.admit())!);
  const leaving = new AbortController();
  const givenUp = sends.admit([new AbortController().signal, leaving.signal]);
  const next = sends.admit();
  leaving.abort();
  expect(await givenUp).toBeUndefined();
  expect(sends.size).toBe(1);
  endFirst();
  const admitted = await next;
  expect(admitted).toBeDefined();
  expect(sends.size).toBe(1);
  admitted!.cancel();
  expect(sends.size).toBe(0);
});

it('a signal aborted before the call takes no room, even with room free', async () => {
  const sends = new SendsInFlight(2);
  const aborted = new AbortController();
  aborted.abort();
  expect(await sends.admit([aborted.signal])).toBeUndefined();
  expect(sends.size).toBe(0);
});

it('a signal aborted after the room was given changes nothing', async () => {
  const sends = new SendsInFlight(1);
  const endFirst = runUntilEnded((await sends.admit())!);
  const late = new AbortController();
  const waiting = sends.admit([late.signal]);
  endFirst();
  const admitted = await waiting;
  late.abort();
  expect(admitted).toBeDefined();
  expect(sends.size).toBe(1);
  admitted!.cancel();
  expect(sends.size).toBe(0);
});
