import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';

/*
 * Open workflows replay their histories on the new code after a deploy. Each history here was
 * recorded by an earlier version of the workflow code (the file's name says what the workflow
 * went through), or by the current one to guard its next change; the current workflow code must
 * replay it to the end without a non-determinism error. A change to the commands a workflow emits
 * is guarded with patched(), and a history recorded before it is added here. Files named
 * `v<version>-…` are what that release had recorded when it stopped for an upgrade, open
 * workflows included: the upgrade test writes them (UPDATE_HISTORIES=1 npm run test:upgrade)
 * from the release before the working tree.
 *
 * The files are `History` messages in protobuf's binary form (`History.encode` of what
 * `handle.fetchHistory()` answers), not the JSON of `temporal workflow show -o json`: this SDK's
 * packages carry two copies of protobufjs, and its JSON loader fails on a type of the other copy.
 */

const HISTORIES = fileURLToPath(new URL('./fixtures/histories', import.meta.url));

describe('recorded workflow histories', () => {
  const files = readdirSync(HISTORIES).filter((file) => file.endsWith('.pb'));

  it('are there to replay', () => {
    expect(files.length).toBeGreaterThanOrEqual(4);
  });

  for (const file of files) {
    it(`replay on the current workflow code: ${file}`, async () => {
      const history = temporal.api.history.v1.History.decode(readFileSync(path.join(HISTORIES, file)));
      await Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history, path.basename(file, '.pb'));
    });
  }
});

/*
 * Histories release 0.2.0 could record, which no fixture reached: each continues a recorded one
 * with the events 0.2.0's workflow code would have added. Their replay fails on a change made
 * after 0.2.0 that is not guarded by patched().
 */
describe('0.2.0 histories past their recorded end', () => {
  const { History, HistoryEvent } = temporal.api.history.v1;
  const { EventType } = temporal.api.enums.v1;
  type History = temporal.api.history.v1.History;

  /** The recorded history of a delivery waiting for its turn at a busy endpoint (its last event: the wait's timer started). */
  const busyEndpoint = () => History.decode(readFileSync(path.join(HISTORIES, 'v0.2.0-delivery-at-a-busy-endpoint-2.pb')));

  /** `history`'s events, then `more` numbered after them, each `seconds` later than the one before. */
  function continued(history: History, more: Record<string, unknown>[], seconds = 1) {
    const events = [...history.events];
    for (const fields of more) {
      const last = events.at(-1)!;
      events.push(HistoryEvent.fromObject({ ...fields, eventId: Number(last.eventId) + 1, eventTime: { seconds: Number(last.eventTime!.seconds) + seconds } }));
    }
    return History.create({ events });
  }

  /** A workflow task that ran (scheduled, started, completed): `suggestContinueAsNew` as the server set it. */
  function workflowTask(firstId: number, suggestContinueAsNew = false) {
    return [
      { eventType: EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, workflowTaskScheduledEventAttributes: { taskQueue: { name: 'webhook-deliveries' }, startToCloseTimeout: { seconds: 10 }, attempt: 1 } },
      { eventType: EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, workflowTaskStartedEventAttributes: { scheduledEventId: firstId, suggestContinueAsNew } },
      { eventType: EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, workflowTaskCompletedEventAttributes: { scheduledEventId: firstId, startedEventId: firstId + 1 } },
    ];
  }

  /** The send activity scheduled again, as the recorded one was, by the workflow task completed at `completedId`. */
  function sendScheduledAgain(history: History, activityId: string, completedId: number) {
    const first = history.events.find((event) => event.activityTaskScheduledEventAttributes)!.activityTaskScheduledEventAttributes!;
    return { eventType: EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, activityTaskScheduledEventAttributes: { ...first, activityId, workflowTaskCompletedEventId: completedId } };
  }

  const replay = (history: History, name: string) =>
    Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history, name);

  it('a wait that ended after Temporal suggested continuing as new goes on to the next attempt', async () => {
    const recorded = busyEndpoint();
    const timer = recorded.events.at(-1)!;
    expect(timer.eventType).toBe(EventType.EVENT_TYPE_TIMER_STARTED);
    const next = Number(timer.eventId) + 1;
    const history = continued(recorded, [
      { eventType: EventType.EVENT_TYPE_TIMER_FIRED, timerFiredEventAttributes: { timerId: timer.timerStartedEventAttributes!.timerId, startedEventId: timer.eventId } },
      ...workflowTask(next + 1, true),
      sendScheduledAgain(recorded, '2', next + 3),
    ]);
    await replay(history, 'wait-then-continue-as-new-suggested');
  });

  it('a turn signal during a wait for a rate limit does not end it', async () => {
    const recorded = busyEndpoint();
    // The same history, had the send answered a wait for its webhook's rate limit (the timer's 300 s).
    const result = recorded.events.find((event) => event.activityTaskCompletedEventAttributes)!.activityTaskCompletedEventAttributes!.result!.payloads![0]!;
    result.data = Buffer.from(JSON.stringify({ attempt: 1, wait: 'rate', waitMs: 300_000 }));
    const timer = recorded.events.at(-1)!;
    const next = Number(timer.eventId) + 1;
    const history = continued(recorded, [
      { eventType: EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, workflowExecutionSignaledEventAttributes: { signalName: 'sendTurn', input: { payloads: [] } } },
      ...workflowTask(next + 1),
      { eventType: EventType.EVENT_TYPE_TIMER_FIRED, timerFiredEventAttributes: { timerId: timer.timerStartedEventAttributes!.timerId, startedEventId: timer.eventId } },
      ...workflowTask(next + 5),
      sendScheduledAgain(recorded, '2', next + 7),
    ]);
    await replay(history, 'rate-wait-with-turn-signal');
  });
});
