/**
 * Reading a delivery's trace in the spans a collector wrote (test/support/collector.ts): the
 * tracing tests of both topologies check the same shape.
 */
import { expect } from 'vitest';
import type { ExportedSpan } from './collector.ts';

/**
 * Spans of a delivery, by its id: as the workflow id of the client's and the activities' spans
 * (`temporalWorkflowId`), of the workflow's own (`workflowId`), or ours (`webhooks.delivery.id`).
 */
export const spansOf = (spans: ExportedSpan[], deliveryId: string) =>
  spans.filter((span) => [span.attributes['webhooks.delivery.id'], span.attributes['temporalWorkflowId'], span.attributes['workflowId']].includes(deliveryId));
/** The spans of `spans` named `name`. */
export const named = (spans: ExportedSpan[], name: string) => spans.filter((span) => span.name === name);
/** The one span of `spans` named `name`. */
export function only(spans: ExportedSpan[], name: string): ExportedSpan {
  const found = named(spans, name);
  expect(found.map((span) => span.name), `spans named ${name}`).toEqual([name]);
  return found[0]!;
}
/** Send attempts of a delivery (the spans of the attempts that made a request), in attempt order. */
export const attemptSpans = (spans: ExportedSpan[], deliveryId: string) =>
  named(spansOf(spans, deliveryId), 'webhooks.attempt').sort(
    (a, b) => Number(a.attributes['webhooks.attempt.number']) - Number(b.attributes['webhooks.attempt.number']),
  );

/**
 * The spans a delivered delivery's trace must hold, each the child of the one before: the publish
 * request, the workflow start, the workflow, the send activity (scheduled, then run once per
 * attempt, which hands the attempt to the worker's background: the attempt's span, with its HTTP
 * exchange); all of `deliveryId` in that one trace.
 */
export function expectOneDeliveryTrace(
  spans: ExportedSpan[],
  deliveryId: string,
  attempts: number,
): { traceId: string; server: ExportedSpan; start: ExportedSpan; run: ExportedSpan } {
  const start = only(spansOf(spans, deliveryId), 'StartWorkflow:deliveryWorkflow');
  const traceId = start.traceId;
  const trace = spans.filter((span) => span.traceId === traceId);
  const server = trace.find((span) => span.spanId === start.parentSpanId)!;
  expect(server).toMatchObject({ name: 'POST /internal/v1/events', kind: 2 });
  expect(server.attributes).toMatchObject({ 'http.route': '/internal/v1/events', 'http.response.status_code': 202 });
  const run = only(spansOf(spans, deliveryId), 'RunWorkflow:deliveryWorkflow');
  expect(run.parentSpanId).toBe(start.spanId);
  const scheduled = named(trace, 'StartActivity:sendDelivery').filter((span) => span.parentSpanId === run.spanId);
  const activities = named(trace, 'RunActivity:sendDelivery').filter((span) => scheduled.some((start) => start.spanId === span.parentSpanId));
  const runs = attemptSpans(spans, deliveryId);
  expect(runs).toHaveLength(attempts);
  for (const attempt of runs) {
    const activity = activities.find((span) => span.spanId === attempt.parentSpanId);
    expect(activity, 'the send activity that handed the attempt off').toBeDefined();
    expect(activity!.attributes['webhooks.attempt.number']).toBe(attempt.attributes['webhooks.attempt.number']);
    const exchange = trace.find((span) => span.parentSpanId === attempt.spanId && span.name === 'POST');
    expect(exchange, 'the HTTP exchange of the attempt').toMatchObject({ kind: 3 });
    expect(exchange!.attributes).toMatchObject({
      'http.request.method': 'POST',
      'server.address': '127.0.0.1',
      'http.response.status_code': attempt.attributes['http.response.status_code'],
    });
  }
  // Every span about the delivery is in this one trace, but for a retry's signal: that is in the trace of its sender.
  const own = spansOf(spans, deliveryId).filter((span) => !/^(SignalWithStartWorkflow|HandleSignal):/.test(span.name));
  expect(new Set(own.map((span) => span.traceId))).toEqual(new Set([traceId]));
  return { traceId, server, start, run };
}
