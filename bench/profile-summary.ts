/**
 * Summarises V8 .cpuprofile files (from `node --cpu-prof`): self time by function, by package
 * or source file, and by category (database, Temporal SDK, HTTP, application code, GC...).
 *
 *   tsx bench/profile-summary.ts <dir or .cpuprofile files...> [--top 30] [--from-us N --to-us N] [--json]
 *
 * `--from-us/--to-us` keep only the samples taken in that window of the profiled process's
 * monotonic clock (microseconds; the same clock as `process.hrtime()` on Linux), which is
 * how bench/run.ts leaves start-up out of the figures.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Row {
  key: string;
  ms: number;
  pct: number;
}

export interface ProfileSummary {
  files: string[];
  /** Milliseconds of samples in the window, idle included. */
  totalMs: number;
  /** Milliseconds not idle. */
  busyMs: number;
  /** Busy time per profiled thread (file). */
  threads: Row[];
  categories: Row[];
  packages: Row[];
  functions: Row[];
}

/** Where a frame's code comes from, shortened: `pkg:<name>`, `src/...`, `node:...`, or a pseudo-frame. */
function origin(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName.startsWith('(')) return functionName; // (garbage collector), (program), (idle), (root)
    return '(native)';
  }
  if (url.startsWith('wasm://')) return 'wasm';
  if (url.startsWith('node:')) return url;
  const clean = url.replace(/^file:\/\//, '');
  const nm = clean.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = clean.slice(nm + 'node_modules/'.length).split('/');
    return `pkg:${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  const rel = clean.replace(/^.*?\/(src|activities|workflows|bench|scripts)\//, '$1/');
  return rel;
}

/** A coarse category for a frame's origin, to answer "where does the service's CPU go". */
function category(frame: CallFrame): string {
  const o = origin(frame);
  const url = frame.url;
  if (o === '(idle)') return 'idle';
  if (o === '(garbage collector)') return 'GC';
  if (o === '(program)') return 'V8/native (unattributed)';
  if (o === 'wasm' || o.startsWith('pkg:@electric-sql/pglite')) return 'database: PGlite (WASM Postgres + socket server)';
  if (o === 'pkg:postgres' || o === 'pkg:drizzle-orm' || o.startsWith('src/db/')) return 'database: client (postgres.js, drizzle)';
  if (o.startsWith('pkg:@temporalio') || o.startsWith('pkg:@grpc') || o === 'pkg:protobufjs' || o.startsWith('pkg:@protobufjs') || o === 'pkg:long' || o === 'pkg:ms' || o === 'pkg:proto3-json-serializer' || o === 'pkg:nexus-rpc')
    return 'Temporal SDK (client, worker, workflow sandbox, protobuf)';
  if (o === 'pkg:webpack' || o.startsWith('pkg:@swc') || o === 'pkg:swc-loader' || o.startsWith('pkg:webpack-') || o === 'pkg:enhanced-resolve' || o === 'pkg:terser' || o === 'pkg:acorn' || o === 'pkg:memfs' || o === 'pkg:tapable' || o === 'pkg:watchpack' || o === 'pkg:schema-utils' || o === 'pkg:ajv' || o === 'pkg:source-map')
    return 'workflow bundling (webpack at start)';
  if (o === 'pkg:tsx' || o === 'pkg:esbuild' || o === 'pkg:get-tsconfig') return 'TypeScript loader (tsx)';
  if (o === 'pkg:hono' || o.startsWith('pkg:@hono')) return 'HTTP API (hono)';
  if (o === 'pkg:zod' || o.startsWith('pkg:@asteasolutions')) return 'validation (zod)';
  if (o === 'pkg:pino' || o.startsWith('pkg:pino') || o === 'pkg:sonic-boom' || o === 'pkg:fast-redact' || o === 'pkg:@pinojs/redact' || o === 'pkg:thread-stream') return 'logging (pino)';
  if (o === 'pkg:prom-client') return 'metrics (prom-client)';
  if (o.startsWith('src/') || o.startsWith('activities/') || o.startsWith('workflows/')) return 'application code';
  if (o.startsWith('node:') || url.startsWith('node:')) {
    if (/https|tls|_tls|crypto/.test(url)) return 'node: TLS/crypto/https';
    if (/http|net|stream|dns/.test(url)) return 'node: http/net/streams';
    return 'node: other internals';
  }
  if (o === '(native)') return 'native functions';
  if (o.startsWith('pkg:')) return `other packages`;
  return 'other';
}

function loadProfiles(inputs: string[]): string[] {
  const files: string[] = [];
  for (const input of inputs) {
    if (statSync(input).isDirectory()) {
      for (const name of readdirSync(input)) if (name.endsWith('.cpuprofile')) files.push(path.join(input, name));
    } else files.push(input);
  }
  return files.sort();
}

function rows(map: Map<string, number>, busy: number, top: number): Row[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([key, us]) => ({ key, ms: Math.round(us / 1000), pct: Math.round((us / Math.max(1, busy)) * 1000) / 10 }));
}

/** Self time by function, origin and category over the given profiles (and time window). */
export function summarise(inputs: string[], options: { top?: number; fromUs?: number; toUs?: number } = {}): ProfileSummary {
  const top = options.top ?? 30;
  const files = loadProfiles(inputs);
  const byFunction = new Map<string, number>();
  const byOrigin = new Map<string, number>();
  const byCategory = new Map<string, number>();
  const byThread = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const file of files) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
    const selfUs = new Map<number, number>();
    let t = profile.startTime;
    for (let i = 0; i < profile.samples.length; i += 1) {
      const delta = profile.timeDeltas[i] ?? 0;
      t += delta;
      if (options.fromUs !== undefined && t < options.fromUs) continue;
      if (options.toUs !== undefined && t > options.toUs) continue;
      // The time since the previous sample is charged to this sample's frame.
      selfUs.set(profile.samples[i]!, (selfUs.get(profile.samples[i]!) ?? 0) + delta);
    }
    let threadBusy = 0;
    for (const [id, us] of selfUs) {
      const frame = nodes.get(id)!.callFrame;
      total += us;
      if (frame.functionName === '(idle)') {
        idle += us;
        continue;
      }
      threadBusy += us;
      const o = origin(frame);
      const name = `${frame.functionName || '(anonymous)'}  ${o}${frame.url ? `:${frame.lineNumber + 1}` : ''}`;
      byFunction.set(name, (byFunction.get(name) ?? 0) + us);
      byOrigin.set(o, (byOrigin.get(o) ?? 0) + us);
      const c = category(frame);
      byCategory.set(c, (byCategory.get(c) ?? 0) + us);
    }
    byThread.set(path.basename(file), threadBusy);
  }
  const busy = total - idle;
  return {
    files,
    totalMs: Math.round(total / 1000),
    busyMs: Math.round(busy / 1000),
    threads: rows(byThread, busy, 100),
    categories: rows(byCategory, busy, 100),
    packages: rows(byOrigin, busy, top),
    functions: rows(byFunction, busy, top),
  };
}

export function formatSummary(summary: ProfileSummary): string {
  const out: string[] = [];
  const table = (title: string, list: Row[]) => {
    out.push(`\n${title}`);
    for (const row of list) out.push(`  ${row.pct.toFixed(1).padStart(5)}%  ${String(row.ms).padStart(7)} ms  ${row.key}`);
  };
  out.push(`${summary.files.length} profile(s); ${summary.busyMs} ms busy of ${summary.totalMs} ms sampled (percentages are of busy time)`);
  table('By thread (profile file):', summary.threads);
  table('By category:', summary.categories);
  table('By package / source file:', summary.packages);
  table('Top functions by self time:', summary.functions);
  return out.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      top: { type: 'string', default: '30' },
      'from-us': { type: 'string' },
      'to-us': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  if (positionals.length === 0) {
    console.error('usage: tsx bench/profile-summary.ts <dir or .cpuprofile files...> [--top N] [--from-us N --to-us N] [--json]');
    process.exit(2);
  }
  const summary = summarise(positionals, {
    top: Number(values.top),
    ...(values['from-us'] ? { fromUs: Number(values['from-us']) } : {}),
    ...(values['to-us'] ? { toUs: Number(values['to-us']) } : {}),
  });
  console.log(values.json ? JSON.stringify(summary, null, 2) : formatSummary(summary));
}
