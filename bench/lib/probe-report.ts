/**
 * What bench/lib/service-probe.mjs wrote about the one service process: memory by kind and
 * event-loop load, once a second, summarised per phase of the run.
 */
import { readFileSync } from 'node:fs';
import { round } from './stats.ts';

interface ProbeLine {
  t: number;
  pid: number;
  thread: string;
  rss_mb: number;
  heap_used_mb: number;
  heap_total_mb: number;
  external_mb: number;
  array_buffers_mb: number;
  event_loop_utilization: number;
  event_loop_delay_ms: { p50: number; p99: number; max: number };
}

function summary(lines: ProbeLine[]) {
  return lines.length === 0
    ? undefined
    : {
        samples: lines.length,
        max_heap_used_mb: Math.max(...lines.map((l) => l.heap_used_mb)),
        max_heap_total_mb: Math.max(...lines.map((l) => l.heap_total_mb)),
        max_external_mb: Math.max(...lines.map((l) => l.external_mb)),
        max_array_buffers_mb: Math.max(...lines.map((l) => l.array_buffers_mb)),
        event_loop_utilization_mean: round(lines.reduce((sum, l) => sum + l.event_loop_utilization, 0) / lines.length, 3),
        event_loop_utilization_max: Math.max(...lines.map((l) => l.event_loop_utilization)),
        event_loop_delay_p99_ms_max: Math.max(...lines.map((l) => l.event_loop_delay_ms.p99)),
        event_loop_delay_max_ms: Math.max(...lines.map((l) => l.event_loop_delay_ms.max)),
      };
}

/** The run's timestamps (epoch ms) the probe is summarised over. */
export interface ProbeWindows {
  spawnedAt: number;
  loadStart: number;
  publishEnd: number;
  drainEnd: number;
}

/** The probe's summary per phase, and the main thread's event-loop utilisation per second of the load. */
export function readServiceProbe(probeFile: string, pid: number, { spawnedAt, loadStart, publishEnd, drainEnd }: ProbeWindows) {
  let lines: ProbeLine[] = [];
  try {
    lines = readFileSync(probeFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as ProbeLine)
      .filter((line) => line.pid === pid);
  } catch {
    // no probe output
  }
  const workerLines = lines.filter((line) => line.thread !== 'main');
  const mainLines = lines.filter((line) => line.thread === 'main');
  const within = (from: number, to: number) => mainLines.filter((line) => line.t >= from && line.t <= to);
  return {
    probe: {
      startup: summary(within(spawnedAt - 1000, loadStart)),
      while_publishing: summary(within(loadStart, publishEnd + 500)),
      load_and_drain: summary(within(loadStart, drainEnd + 500)),
      worker_threads: {
        note: 'V8 isolates of worker threads (the Temporal workflow thread), max over the run',
        threads: [...new Set(workerLines.map((l) => l.thread))].length,
        max_heap_used_mb: workerLines.length ? Math.max(...workerLines.map((l) => l.heap_used_mb)) : 0,
        max_heap_total_mb: workerLines.length ? Math.max(...workerLines.map((l) => l.heap_total_mb)) : 0,
        max_external_mb: workerLines.length ? Math.max(...workerLines.map((l) => l.external_mb)) : 0,
      },
      note: 'main thread: heap = V8 heap of the API, activities and Temporal client; external = Buffers and native objects held from JavaScript',
    },
    eventLoopUtilization: within(loadStart, drainEnd + 500).map((l) => [round((l.t - loadStart) / 1000, 2), l.event_loop_utilization] as [number, number]),
  };
}

export type ServiceProbe = ReturnType<typeof readServiceProbe>['probe'];
