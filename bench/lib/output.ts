/** Reporting helpers of the benchmark: host facts, progress, tables, per-process CPU, chart panels. */
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Panel, Series } from './chart.ts';
import type { ProcessSampler } from './procstat.ts';
import { REPO_ROOT } from './stack.ts';
import { round, type Percentiles, type SecondBin } from './stats.ts';

export const now = () => performance.timeOrigin + performance.now();
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function loadAverage(): string {
  try {
    return execFileSync('uptime', { encoding: 'utf8' }).trim();
  } catch {
    return os.loadavg().map((v) => v.toFixed(2)).join(', ');
  }
}

export function hostInfo() {
  return {
    cpus: os.cpus().length,
    cpu_model: os.cpus()[0]?.model ?? 'unknown',
    memory_gb: round(os.totalmem() / 1024 ** 3, 1),
    node: process.version,
    kernel: os.release(),
  };
}

export function stamp(): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

export function outputPaths(out: string | undefined, defaultName: string): { json: string; svg: string } {
  const json = out ? path.resolve(out) : path.join(REPO_ROOT, 'bench', 'results', `${defaultName}.json`);
  mkdirSync(path.dirname(json), { recursive: true });
  return { json, svg: json.replace(/\.json$/i, '') + '.svg' };
}

const isTty = process.stderr.isTTY;
let lastProgressLine = 0;
export function progress(line: string, force = false): void {
  if (isTty) {
    process.stderr.write(`\r\x1b[2K${line}`);
  } else if (force || Date.now() - lastProgressLine >= 5_000) {
    process.stderr.write(`${line}\n`);
    lastProgressLine = Date.now();
  }
}
export function endProgress(): void {
  if (isTty) process.stderr.write('\n');
}

export function printTable(title: string, rows: [string, string | number][]): void {
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log(`\n${title}`);
  console.log('-'.repeat(Math.min(100, title.length)));
  for (const [key, value] of rows) console.log(`${key.padEnd(width)}  ${value}`);
}

export const fmtP = (p: Percentiles) => `p50 ${p.p50}  p95 ${p.p95}  p99 ${p.p99}  max ${p.max}`;

/** CPU seconds of each group between two samples, and average cores used. */
export function cpuBetween(sampler: ProcessSampler, from: number, to: number) {
  const a = sampler.at(from)!;
  const b = sampler.at(to)!;
  const seconds = Math.max(0.001, (b.t - a.t) / 1000);
  const cpu: Record<string, number> = {};
  const cores: Record<string, number> = {};
  for (const name of Object.keys(b.groups)) {
    const delta = (b.groups[name]?.cpuSeconds ?? 0) - (a.groups[name]?.cpuSeconds ?? 0);
    cpu[name] = round(delta, 2);
    cores[name] = round(delta / seconds, 2);
  }
  return { cpu, cores, seconds: round(seconds, 1) };
}

/** Per-second CPU (cores) and RSS of each group from the sampler, relative to `origin`. */
export function resourceSeries(sampler: ProcessSampler, origin: number, groups: string[], end = Infinity) {
  const cpu: Record<string, [number, number][]> = {};
  const rss: Record<string, [number, number][]> = {};
  for (const name of groups) {
    cpu[name] = [];
    rss[name] = [];
  }
  const samples = sampler.samples.filter((s) => s.t >= origin - 1000 && s.t <= end + 600);
  for (let i = 1; i < samples.length; i += 1) {
    const prev = samples[i - 1]!;
    const cur = samples[i]!;
    const dt = (cur.t - prev.t) / 1000;
    if (dt <= 0) continue;
    const x = (cur.t - origin) / 1000;
    if (x < 0) continue;
    for (const name of groups) {
      const c = ((cur.groups[name]?.cpuSeconds ?? 0) - (prev.groups[name]?.cpuSeconds ?? 0)) / dt;
      cpu[name]!.push([round(x, 2), round(c, 2)]);
      rss[name]!.push([round(x, 2), round(cur.groups[name]?.rssMb ?? 0, 1)]);
    }
  }
  return { cpu, rss };
}

export const GROUP_COLORS: Record<string, string> = {
  service: '#1f77b4',
  temporal: '#d62728',
  postgres: '#8c564b',
  pglite: '#8c564b',
  receiver: '#2ca02c',
  bench: '#9467bd',
  sender: '#ff7f0e',
  helpers: '#bcbd22',
  api: '#17becf',
  worker: '#1f77b4',
  ui: '#e377c2',
  collector: '#aec7e8',
  other: '#7f7f7f',
};

export function latencyPanel(bins: readonly SecondBin[]): Panel {
  const pick = (key: 'p50' | 'p95' | 'p99') =>
    bins.filter((b) => b.latency).map((b) => [b.t + 0.5, b.latency![key]] as [number, number]);
  return {
    title: 'Latency of the deliveries that landed in each second (publish call started → receiver got the POST)',
    yLabel: 'ms (log scale)',
    log: true,
    series: [
      { name: 'p50', color: '#2ca02c', points: pick('p50') },
      { name: 'p95', color: '#ff7f0e', points: pick('p95') },
      { name: 'p99', color: '#d62728', points: pick('p99') },
    ],
  };
}

export function cpuPanel(cpu: Record<string, [number, number][]>, elu?: [number, number][]): Panel {
  return {
    title: 'CPU by process (cores; the machine has ' + os.cpus().length + '; "other" = processes outside the benchmark)',
    yLabel: 'cores',
    series: [
      ...Object.entries(cpu)
        .filter(([, points]) => points.some((p) => p[1] > 0.01))
        .map(([name, points]): Series => ({ name, color: GROUP_COLORS[name] ?? '#333', points, ...(name === 'other' ? { dash: '4 3' } : {}) })),
      ...(elu && elu.length ? [{ name: 'service event loop busy (0-1)', color: '#17becf', dash: '2 2', points: elu }] : []),
    ],
    refs: [{ y: os.cpus().length, label: 'all cores', color: '#000' }],
  };
}
