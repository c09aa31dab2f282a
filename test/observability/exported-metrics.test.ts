import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killStarted } from '../support/embedded-service.ts';
import { exportedNames } from './exposition.ts';
import { allQueries, metricNamesOf } from './files.ts';
import { startServiceWithDelivery, type RunningService, type ScrapedRoles } from './running-service.ts';

/** Series Prometheus makes itself for every target: not the service's to export. */
const PROMETHEUS_SERIES = new Set(['up']);
/** Families of prom-client's default process metrics, documented as groups. */
const RUNTIME_FAMILY = /^(process_|nodejs_)/;
/** Labels a histogram or summary family carries by construction. */
const STRUCTURAL_LABELS = new Set(['le', 'quantile']);

/** The SDK's labels whose values are the project's workflow and activity names. */
const PROJECT_NAMED_SDK_LABELS = new Set(['workflow_type', 'activity_type']);

const metricsDoc = readFileSync(new URL('../../docs/metrics.md', import.meta.url), 'utf8');

let service: RunningService;
let scraped: ScrapedRoles;

beforeAll(async () => {
  service = await startServiceWithDelivery();
  scraped = await service.scrape();
});
afterAll(async () => {
  await service?.stop();
  killStarted();
});

/** Each sample of a text exposition: its family (histogram suffixes dropped) and its labels. */
function samples(text: string): { family: string; labels: Record<string, string> }[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const match = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? /.exec(line);
      if (!match) throw new Error(`not a sample line: ${line}`);
      const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
      return { family: match[1]!.replace(/_(bucket|sum|count)$/, ''), labels };
    });
}

/** docs/metrics.md's list item of the values of the SDK's label `label` (it may run over several lines), if it has one. */
function sdkTypeList(label: string): string | undefined {
  return new RegExp(`^- \`${label}\`:[^]*?(?=^- |^$)`, 'm').exec(metricsDoc)?.[0];
}

/** The rows of docs/metrics.md's tables that name `family` in backticks. */
function docRowsOf(family: string): string[] {
  return metricsDoc.split('\n').filter((line) => line.startsWith('|') && line.includes(`\`${family}\``));
}

describe('/metrics of the API and the worker processes, after an event delivered to three webhooks', () => {
  it('serve every metric that the dashboard and the alert rules query', () => {
    const served = new Set([...exportedNames(scraped.api), ...exportedNames(scraped.worker)]);
    const queries = allQueries();
    expect(queries.length).toBeGreaterThan(40);
    const missing = queries.flatMap((query) =>
      metricNamesOf(query.expr)
        .filter((name) => !served.has(name) && !PROMETHEUS_SERIES.has(name))
        .map((name) => `${query.where}: ${name}`),
    );
    expect(missing).toEqual([]);
  });

  it("carry the Temporal SDK's metrics (prefix temporal_, durations in seconds) in the worker's only", () => {
    expect(scraped.worker).toMatch(/^temporal_activity_schedule_to_start_latency_bucket\{.*le="0\.1".*\} \d+/m);
    expect(scraped.worker).toMatch(/^temporal_worker_task_slots_available\{.*worker_type="ActivityWorker".*\} \d+/m);
    expect(scraped.worker).toMatch(/^temporal_local_activity_execution_latency_bucket\{.*activity_type="repairStuckDeliveries".*\} \d+/m);
    expect(scraped.api).not.toMatch(/^temporal_/m);
  });

  it('report the database figures in both roles: reachable, no breaker open, the outbox empty', () => {
    for (const text of [scraped.api, scraped.worker]) {
      expect(text).toMatch(/^webhook_database_up 1$/m);
      expect(text).toMatch(/^webhook_circuit_breakers_open 0$/m);
      expect(text).toMatch(/^webhook_circuit_breaker_oldest_open_seconds 0$/m);
      expect(text).toMatch(/^webhook_events_undispatched 0$/m);
      expect(text).toMatch(/^webhook_events_undispatched_oldest_seconds 0$/m);
    }
  });

  it('are each listed in docs/metrics.md with every label they carry, the values of the service\'s own labels, and every workflow and activity type', () => {
    const undocumented: string[] = [];
    const sdkTypeLists = new Map([...PROJECT_NAMED_SDK_LABELS].map((label) => [label, sdkTypeList(label)]));
    for (const [label, list] of sdkTypeLists) if (list === undefined) undocumented.push(`the list of ${label} values`);
    for (const { family, labels } of [...samples(scraped.api), ...samples(scraped.worker)]) {
      if (RUNTIME_FAMILY.test(family)) continue;
      const rows = docRowsOf(family);
      if (rows.length === 0) {
        undocumented.push(family);
        continue;
      }
      for (const [label, value] of Object.entries(labels)) {
        if (STRUCTURAL_LABELS.has(label)) continue;
        if (!rows.some((row) => row.includes(`\`${label}\``))) undocumented.push(`${family} label ${label}`);
        // The service's own labels are enumerated in their rows; the SDK's workflow and activity
        // types are the project's own names, listed once for all its families.
        if (family.startsWith('webhook_') && !rows.some((row) => row.includes(`\`${value}\``))) undocumented.push(`${family} ${label}="${value}"`);
        const typeList = sdkTypeLists.get(label);
        if (typeList !== undefined && !typeList.includes(`\`${value}\``)) undocumented.push(`${label}="${value}"`);
      }
    }
    expect([...new Set(undocumented)]).toEqual([]);
    expect(metricsDoc).toMatch(/`process_\*`/);
    expect(metricsDoc).toMatch(/`nodejs_\*`/);
  });
});
