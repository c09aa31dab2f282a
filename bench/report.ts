/**
 * Prints a Markdown table of benchmark results (the JSON files `npm run bench` writes), one row
 * per run, for docs/performance.md:
 *
 *   npx tsx bench/report.ts <results.json | folder> ...
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

interface Result {
  mode: string;
  command: string;
  offered_rate: number | 'max';
  duration_s: number;
  webhooks: number;
  fail_ratio: number;
  published: number;
  deliveries_expected?: number;
  delivered: number;
  lost: number;
  duplicates: number;
  invalid_signatures: number;
  throughput_dps: number;
  latency_ms: { p50: number; p95: number; p99: number; max: number };
  publish_ms?: { p50: number; p99: number };
  rss_mb: Record<string, number | { max: number; max_during_load?: number; largest_process_max?: number }>;
  cpu_ms_per_delivery?: Record<string, number>;
  cpu_per_delivery_ms?: Record<string, number>;
}

const files = process.argv.slice(2).flatMap((arg) =>
  statSync(arg).isDirectory()
    ? readdirSync(arg)
        .filter((name) => name.endsWith('.json'))
        .sort()
        .map((name) => path.join(arg, name))
    : [arg],
);

const rss = (value: Result['rss_mb'][string] | undefined) => (typeof value === 'object' ? value.max : value);
const largest = (value: Result['rss_mb'][string] | undefined) => (typeof value === 'object' ? value.largest_process_max : undefined);
const cell = (value: number | string | undefined) => (value === undefined ? '–' : String(value));

const header = [
  'run', 'offered (events/s)', 'webhooks', 'fail ratio', 'deliveries', 'lost', 'dup.', 'invalid sig.',
  'throughput_dps', 'latency p50 / p95 / p99 ms', 'publish p50 / p99 ms', 'RSS MB service (API + worker)',
  'CPU ms per delivery: service / Temporal / database',
];
console.log(`| ${header.join(' | ')} |`);
console.log(`|${header.map(() => '---').join('|')}|`);
for (const file of files) {
  let result: Result;
  try {
    result = JSON.parse(readFileSync(file, 'utf8')) as Result;
  } catch {
    continue; // not a bench result (for example an experiment's output)
  }
  if (result.latency_ms === undefined || result.mode === undefined) continue;
  const cpu = result.cpu_ms_per_delivery ?? result.cpu_per_delivery_ms ?? {};
  const database = cpu['pglite'] ?? cpu['postgres'];
  const row = [
    `[${path.basename(file, '.json')}](${path.relative('docs', file)})`,
    result.mode === 'ceiling' ? 'max (send path alone)' : String(result.offered_rate),
    result.webhooks,
    result.fail_ratio,
    `${result.delivered} / ${result.deliveries_expected ?? result.published}`,
    result.lost,
    result.duplicates,
    result.invalid_signatures,
    result.throughput_dps,
    `${result.latency_ms.p50} / ${result.latency_ms.p95} / ${result.latency_ms.p99}`,
    result.publish_ms ? `${result.publish_ms.p50} / ${result.publish_ms.p99}` : '–',
    result.mode === 'cluster' ? `largest replica: api ${cell(largest(result.rss_mb['api']))}, worker ${cell(largest(result.rss_mb['worker']))}` : cell(rss(result.rss_mb['service'] ?? result.rss_mb['sender'])),
    result.mode === 'ceiling'
      ? `sender ${cell(cpu['sender'])}`
      : `${cell(cpu['service'])} / ${cell(cpu['temporal'])} / ${cell(database)}`,
  ];
  console.log(`| ${row.join(' | ')} |`);
}
