/**
 * Process accounting from /proc (Linux): CPU time (utime + stime) and resident memory of a
 * process and its descendants, and a sampler that records both over a run.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

function sysconf(name: string, fallback: number): number {
  try {
    const value = Number(execFileSync('getconf', [name], { encoding: 'utf8' }).trim());
    return Number.isFinite(value) && value > 0 ? value : fallback;
  } catch {
    return fallback;
  }
}

const CLOCK_TICKS = sysconf('CLK_TCK', 100);

/** What /proc/<pid>/stat says about one process. */
export interface ProcStat {
  pid: number;
  comm: string;
  ppid: number;
  /** utime + stime, in seconds. */
  cpuSeconds: number;
}

/** Parses a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat line. */
function parseStat(text: string): Omit<ProcStat, 'pid'> {
  // comm is in parentheses and may itself contain spaces or parentheses.
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).split(' ');
  // fields[0] is field 3 (state); ppid is field 4, utime field 14, stime field 15.
  return {
    comm: text.slice(open + 1, close),
    ppid: Number(fields[1]),
    cpuSeconds: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS,
  };
}

export function readStat(pid: number): ProcStat | undefined {
  try {
    return { pid, ...parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8')) };
  } catch {
    return undefined;
  }
}

/** A `Name:   <n> kB` field of a /proc file, in MB; 0 when absent, undefined when the process is gone. */
function kbFieldMb(file: string, field: string): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(file, 'utf8'));
    return match ? Number(match[1]) / 1024 : 0;
  } catch {
    return undefined;
  }
}

/** Resident set size in MB (VmRSS of /proc/<pid>/status), undefined if the process is gone. */
export const readRssMb = (pid: number) => kbFieldMb(`/proc/${pid}/status`, 'VmRSS');

/**
 * Proportional set size in MB (Pss of /proc/<pid>/smaps_rollup): pages shared by several
 * processes (PostgreSQL's shared buffers, a binary's text) are divided among them, so the sum
 * over a group of processes is the group's real memory, where the sum of RSS counts shared
 * pages once per process.
 */
export const readPssMb = (pid: number) => kbFieldMb(`/proc/${pid}/smaps_rollup`, 'Pss');

/** Every process on the machine (pid, parent, comm, CPU). */
export function listProcesses(): ProcStat[] {
  const out: ProcStat[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat) out.push(stat);
  }
  return out;
}

/** `pid` and all its descendants. */
export function processTree(pid: number, all: ProcStat[] = listProcesses()): number[] {
  const children = new Map<number, number[]>();
  for (const p of all) {
    const list = children.get(p.ppid) ?? [];
    list.push(p.pid);
    children.set(p.ppid, list);
  }
  const out: number[] = [];
  const stack = [pid];
  while (stack.length > 0) {
    const next = stack.pop()!;
    out.push(next);
    stack.push(...(children.get(next) ?? []));
  }
  return out;
}

/**
 * A named group of processes whose CPU and memory are summed. `pids` is called at each
 * sample, so groups whose members change (a server spawned later, postgres backends) work.
 */
export interface ProcessGroup {
  name: string;
  pids: (all: ProcStat[]) => number[];
}

/** One sample of every group. */
export interface Sample {
  /** Epoch milliseconds. */
  t: number;
  phase: string;
  /** Per group: CPU, the sum of RSS and of PSS ({@link readPssMb}), its largest process's RSS, and how many processes. */
  groups: Record<string, { cpuSeconds: number; rssMb: number; pssMb: number; largestRssMb: number; pids: number }>;
}

/**
 * Samples CPU and RSS of process groups at a fixed period, and PSS less often: the kernel walks
 * every page table of a process to answer smaps_rollup, which for the production topology's
 * PostgreSQL backends cost the benchmark's process a third of a core when read every 500 ms.
 * A sample between two PSS reads (every `pssPeriodMs`, and at the first sample of a phase)
 * carries its group's last PSS. The CPU of a process that exits is no longer counted, so groups
 * should be made of long-lived processes.
 */
export class ProcessSampler {
  readonly samples: Sample[] = [];
  phase = 'startup';
  #timer: NodeJS.Timeout | undefined;
  #pssReadAt = Number.NEGATIVE_INFINITY;

  readonly groups: ProcessGroup[];
  readonly periodMs: number;
  readonly pssPeriodMs: number;

  constructor(groups: ProcessGroup[], periodMs = 500, pssPeriodMs = 5_000) {
    this.groups = groups;
    this.periodMs = periodMs;
    this.pssPeriodMs = pssPeriodMs;
  }

  start(): void {
    this.sample();
    this.#timer = setInterval(() => this.sample(), this.periodMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#pssReadAt = Number.NEGATIVE_INFINITY;
    this.sample();
  }

  sample(): Sample {
    const t = Date.now();
    const previous = this.samples.at(-1);
    // Read at the first sample of a phase too, so a phase's maximum is its own.
    const readPss = t - this.#pssReadAt >= this.pssPeriodMs || previous?.phase !== this.phase;
    if (readPss) this.#pssReadAt = t;
    const all = listProcesses();
    const byPid = new Map(all.map((p) => [p.pid, p]));
    const groups: Sample['groups'] = {};
    for (const group of this.groups) {
      const pids = group.pids(all).filter((pid) => byPid.has(pid));
      let cpu = 0;
      let rss = 0;
      let pss = 0;
      let largest = 0;
      for (const pid of pids) {
        const stat = byPid.get(pid)!;
        const processRss = readRssMb(pid) ?? 0;
        cpu += stat.cpuSeconds;
        rss += processRss;
        largest = Math.max(largest, processRss);
        if (readPss) pss += readPssMb(pid) ?? 0;
      }
      if (!readPss) pss = previous?.groups[group.name]?.pssMb ?? 0;
      groups[group.name] = { cpuSeconds: cpu, rssMb: rss, pssMb: pss, largestRssMb: largest, pids: pids.length };
    }
    const machine = machineCpu();
    groups['machine'] = { cpuSeconds: machine.busySeconds, rssMb: 0, pssMb: 0, largestRssMb: 0, pids: machine.cores };
    const sample: Sample = { t, phase: this.phase, groups };
    this.samples.push(sample);
    return sample;
  }

  /** The latest sample at or before `t` (or the first). */
  at(t: number): Sample | undefined {
    let found: Sample | undefined;
    for (const sample of this.samples) {
      if (sample.t <= t) found = sample;
      else break;
    }
    return found ?? this.samples[0];
  }

  /** Max RSS (summed, PSS summed, or of its largest process) of a group over the samples of the given phases (all phases when omitted). */
  maxRss(group: string, phases?: string[], kind: 'rssMb' | 'pssMb' | 'largestRssMb' = 'rssMb'): number {
    let max = 0;
    for (const sample of this.samples) {
      if (phases && !phases.includes(sample.phase)) continue;
      max = Math.max(max, sample.groups[group]?.[kind] ?? 0);
    }
    return max;
  }
}

/** Busy CPU seconds of the whole machine (all cores) from /proc/stat, and the core count. */
export function machineCpu(): { busySeconds: number; cores: number } {
  const text = readFileSync('/proc/stat', 'utf8');
  const first = text.slice(0, text.indexOf('\n')).split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = first;
  const cores = (text.match(/^cpu\d+ /gm) ?? []).length;
  return { busySeconds: (user + nice + system + irq + softirq + steal) / CLOCK_TICKS, cores };
}

/**
 * CPU seconds of each thread of a process, summed by role ({@link threadRole}), and of the
 * whole process, which also counts threads that have exited.
 */
export function threadCpu(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`).sort((a, b) => Number(a) - Number(b));
  } catch {
    return out;
  }
  let coreStarted = false;
  for (const tid of tids) {
    let thread: Omit<ProcStat, 'pid'>;
    try {
      thread = parseStat(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
    } catch {
      continue;
    }
    coreStarted ||= thread.comm.startsWith('tokio');
    const role = threadRole(Number(tid) === pid, thread.comm, coreStarted);
    out[role] = (out[role] ?? 0) + thread.cpuSeconds;
  }
  const total = readStat(pid)?.cpuSeconds;
  if (total !== undefined) out[PROCESS_TOTAL] = total;
  return out;
}

/** The key of {@link threadCpu}'s reading of the whole process, threads that exited included. */
const PROCESS_TOTAL = 'process';

/**
 * What a thread of a Node process does, from its name and when it was created (thread ids
 * grow): Node names its own threads "node": the main thread, V8's helpers (GC, compiler),
 * started with the process, and worker threads, which the service starts only after the
 * Temporal core (the SDK's workflow thread). Other names are kept, numbered ones grouped.
 */
function threadRole(isMain: boolean, comm: string, coreStarted: boolean): string {
  if (isMain) return 'main (API, activities, SDK)';
  if (comm !== 'node') return comm;
  return coreStarted ? 'workflow thread (SDK sandbox)' : 'other node threads (V8 helpers, loader)';
}

/**
 * Per-role difference of two {@link threadCpu} readings; what the process spent beyond its
 * live threads went to threads that exited in between (Node's `vm` timeout starts a watchdog
 * thread for every call into the workflow sandbox).
 */
export function threadCpuDelta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  let threads = 0;
  for (const [name, value] of Object.entries(after)) {
    if (name === PROCESS_TOTAL) continue;
    const delta = value - (before[name] ?? 0);
    threads += delta;
    if (delta > 0.005) out[name] = Math.round(delta * 100) / 100;
  }
  const total = (after[PROCESS_TOTAL] ?? 0) - (before[PROCESS_TOTAL] ?? 0);
  if (total - threads > 0.005) out['exited threads (vm watchdogs)'] = Math.round((total - threads) * 100) / 100;
  return Object.fromEntries(Object.entries(out).sort((a, b) => b[1] - a[1]));
}

/**
 * Waits until the machine is quiet: its CPU busy below `busyBelow` (a fraction of all cores) over
 * two `windowS`-second windows in a row, or `maxS` seconds have passed. Resolves how long it waited.
 */
export async function waitForQuietMachine({ busyBelow = 0.6, windowS = 5, maxS = 180 } = {}): Promise<number> {
  const started = Date.now();
  let quietWindows = 0;
  while (quietWindows < 2 && Date.now() - started < maxS * 1000) {
    const before = machineCpu();
    await new Promise((resolve) => setTimeout(resolve, windowS * 1000));
    const after = machineCpu();
    const busy = (after.busySeconds - before.busySeconds) / (windowS * after.cores);
    quietWindows = busy < busyBelow ? quietWindows + 1 : 0;
  }
  return (Date.now() - started) / 1000;
}
