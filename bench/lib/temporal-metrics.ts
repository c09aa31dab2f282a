/**
 * Reads the Temporal server's own Prometheus metrics (the dev server prints their address in its
 * log), so a run can say how many persistence (SQLite) operations and frontend requests each
 * delivery costs the server, and how long its persistence operations take.
 */
import { readFileSync } from 'node:fs';

const WANTED = /^(persistence_requests|persistence_latency_sum|persistence_latency_count|service_requests|service_latency_sum|service_latency_count)\{([^}]*)\} ([0-9.eE+-]+)$/;

export type MetricSnapshot = Map<string, number>;

/** The metrics address from the dev server's log (`Metrics: http://localhost:NNNN/metrics`). */
export function metricsUrlFromLog(logFile: string): string | undefined {
  try {
    const match = /Metrics:\s+(http:\/\/\S+\/metrics)/.exec(readFileSync(logFile, 'utf8'));
    return match?.[1]?.replace('localhost', '127.0.0.1');
  } catch {
    return undefined;
  }
}

export async function scrape(url: string): Promise<MetricSnapshot | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    const text = await res.text();
    const out: MetricSnapshot = new Map();
    for (const line of text.split('\n')) {
      const match = WANTED.exec(line);
      if (!match) continue;
      const labels = Object.fromEntries(
        [...match[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]),
      );
      const key = `${match[1]}|${labels['service_name'] ?? ''}|${labels['operation'] ?? ''}`;
      out.set(key, (out.get(key) ?? 0) + Number(match[3]));
    }
    return out;
  } catch {
    return undefined;
  }
}

export interface OperationCost {
  operation: string;
  per_delivery: number;
  mean_ms?: number | undefined;
}

export interface TemporalServerCost {
  persistence_ops_per_delivery: number;
  persistence_ms_per_delivery: number;
  persistence: OperationCost[];
  frontend_requests_per_delivery: number;
  frontend: OperationCost[];
}

/** Per-delivery persistence and frontend request counts between two snapshots. */
export function costPerDelivery(before: MetricSnapshot, after: MetricSnapshot, deliveries: number): TemporalServerCost {
  const n = Math.max(1, deliveries);
  const persistence = new Map<string, { count: number; seconds: number }>();
  const frontend = new Map<string, { count: number; seconds: number }>();
  for (const key of after.keys()) {
    const [metric, service, operation] = key.split('|') as [string, string, string];
    const value = (after.get(key) ?? 0) - (before.get(key) ?? 0);
    if (value <= 0) continue;
    const map = metric.startsWith('persistence_') ? persistence : service === 'frontend' ? frontend : undefined;
    if (!map) continue;
    const entry = map.get(operation) ?? { count: 0, seconds: 0 };
    if (metric.endsWith('_requests')) entry.count += value;
    else if (metric.endsWith('_latency_sum')) entry.seconds += value;
    else continue;
    map.set(operation, entry);
  }
  const rows = (map: Map<string, { count: number; seconds: number }>) =>
    [...map.entries()]
      .filter(([, v]) => v.count > 0)
      .sort((a, b) => b[1].count - a[1].count)
      .map(([operation, v]) => ({
        operation,
        per_delivery: Math.round((v.count / n) * 100) / 100,
        mean_ms: Math.round((v.seconds / v.count) * 1000 * 100) / 100,
      }));
  const persistenceRows = rows(persistence);
  const frontendRows = rows(frontend);
  const sum = (map: Map<string, { count: number; seconds: number }>, field: 'count' | 'seconds') =>
    [...map.values()].reduce((total, v) => total + v[field], 0);
  return {
    persistence_ops_per_delivery: Math.round((sum(persistence, 'count') / n) * 10) / 10,
    persistence_ms_per_delivery: Math.round(((sum(persistence, 'seconds') * 1000) / n) * 10) / 10,
    persistence: persistenceRows,
    frontend_requests_per_delivery: Math.round((sum(frontend, 'count') / n) * 10) / 10,
    frontend: frontendRows,
  };
}
