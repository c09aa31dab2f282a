/**
 * Experiment: what sealing the event payload at rest costs per delivery, in CPU of the service:
 * sealing it where the event is stored (AES-256-GCM, plus the request-id lookup hash) and opening
 * it where the notification body is built, on the test's `docauth.completed` data, against the
 * JSON work the same path did before sealing (the payload serialised into a jsonb parameter).
 *
 *   npx tsx bench/experiments/payload-sealing.ts [--events 50000]
 */
import { parseArgs } from 'node:util';
import { openPayload, sealPayload } from '../../src/db/sealing.ts';
import { newId } from '../../src/ids.ts';
import { generateEncryptionKey, SecretBox } from '../../src/secrets/crypto.ts';
import { docauthData } from '../../test/support/event-data.ts';
import { round } from '../lib/stats.ts';

const { values } = parseArgs({ options: { events: { type: 'string', default: '50000' } } });
const count = Number(values.events);
const box = new SecretBox(generateEncryptionKey());
const events = Array.from({ length: count }, () => ({ id: newId('event'), data: docauthData() }));

/** Microseconds of CPU per item of `work`, over the whole set, after a warm-up pass. */
function microsecondsPer(work: (index: number) => unknown): number {
  for (let i = 0; i < Math.min(count, 2_000); i += 1) work(i);
  const before = process.cpuUsage();
  for (let i = 0; i < count; i += 1) work(i);
  const used = process.cpuUsage(before);
  return round((used.user + used.system) / count, 2);
}

const sealed = events.map((event) => ({ id: event.id, payloadLegacy: null, ...sealPayload(box, event.id, 'prj_bench', event.data) }));
const result = {
  events: count,
  sealed_length_chars: sealed[0]!.payloadSealed.length,
  us_per_delivery: {
    seal_at_publish: microsecondsPer((i) => sealPayload(box, events[i]!.id, 'prj_bench', events[i]!.data)),
    open_at_send: microsecondsPer((i) => openPayload(box, sealed[i]!)),
    json_before_sealing: microsecondsPer((i) => JSON.stringify(events[i]!.data)),
  },
};
console.log(JSON.stringify(result, null, 2));
