/**
 * Backends the bench can start itself for comparison runs (never used by the default run):
 *
 * - `startOwnTemporal`: the Temporal dev server as the service starts it
 *   (src/local/dev-server.ts) plus extra arguments, e.g. `--sqlite-pragma synchronous=off`, so a
 *   change to the dev-server flags can be measured without touching the service.
 * - `startOwnPostgres`: a throwaway local Postgres (initdb in the work dir, pg_stat_statements
 *   loaded), to measure the service on real Postgres and count statements per delivery.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { startDevServer } from '../../src/local/dev-server.ts';
import { freePort, killGroup } from './stack.ts';
import { metricsUrlFromLog } from './temporal-metrics.ts';

export interface OwnBackend {
  readonly url: string;
  /** The root pid of the backend's process tree. */
  readonly pid: number;
  readonly description: string;
  /** The server's Prometheus metrics, if it has them. */
  readonly metricsUrl?: string;
  stop(): Promise<void>;
}

function waitExit(child: ChildProcess, ms: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      killGroup(child.pid, 'SIGKILL');
      resolve();
    }, ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** The service's own dev server (`startDevServer`, same flags), with `extraArgs` after them. */
export async function startOwnTemporal(workDir: string, extraArgs: string[]): Promise<OwnBackend> {
  const stateDir = path.join(workDir, 'own-temporal');
  const server = await startDevServer({
    cliPath: process.env['TEMPORAL_CLI_PATH'],
    stateDir,
    port: await freePort(),
    uiPort: undefined,
    namespace: 'default',
    extraArgs,
  });
  return {
    url: server.address,
    pid: Number(readFileSync(path.join(stateDir, 'temporal.pid'), 'utf8')),
    description: `Temporal dev server started by the bench (service flags + ${extraArgs.join(' ') || 'nothing'}), headless`,
    metricsUrl: metricsUrlFromLog(path.join(stateDir, 'temporal.log')),
    stop: () => server.stop(),
  };
}

function postgresBin(name: string): string {
  for (const dir of [...(process.env['PATH'] ?? '').split(':'), ...safeList('/usr/lib/postgresql').map((v) => `/usr/lib/postgresql/${v}/bin`)]) {
    const file = path.join(dir, name);
    if (dir && existsSync(file)) return file;
  }
  throw new Error(`${name} not found: install PostgreSQL server binaries to use --postgres`);
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir).sort().reverse();
  } catch {
    return [];
  }
}

/** Postgres refuses to run as root: then it runs as the `postgres` user. */
function asPostgresUser(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

export async function startOwnPostgres(workDir: string, settings: string[]): Promise<OwnBackend> {
  const dataDir = path.join(workDir, 'own-postgres');
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(workDir, uid, gid); // the postgres user must reach its data dir
    chownSync(dataDir, uid, gid);
  }
  const [initCmd, initArgs] = asPostgresUser(postgresBin('initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  execFileSync(initCmd, initArgs, { stdio: 'ignore' });
  const port = await freePort();
  const config = [
    '-p', String(port),
    '-k', dataDir,
    '-c', 'listen_addresses=127.0.0.1',
    '-c', 'max_connections=200',
    '-c', 'shared_preload_libraries=pg_stat_statements',
    '-c', 'pg_stat_statements.track_utility=on',
    ...settings.flatMap((setting) => ['-c', setting]),
  ];
  const [cmd, args] = asPostgresUser(postgresBin('postgres'), ['-D', dataDir, ...config]);
  const child = spawn(cmd, args, { stdio: 'ignore', detached: true });
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the bench's Postgres exited (${child.exitCode})`);
    const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 2 });
    try {
      await sql`create extension if not exists pg_stat_statements`;
      break;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`the bench's Postgres did not start: ${String(error)}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    } finally {
      await sql.end({ timeout: 1 });
    }
  }
  return {
    url,
    pid: child.pid!,
    description: `PostgreSQL ${execFileSync(postgresBin('postgres'), ['--version'], { encoding: 'utf8' }).trim().replace(/^postgres \(PostgreSQL\) /, '')} started by the bench on a local disk (default durability: fsync on, synchronous_commit on${settings.length ? `; ${settings.join(', ')}` : ''})`,
    async stop() {
      // SIGINT = fast shutdown, sent to the postmaster itself.
      const pidFile = path.join(dataDir, 'postmaster.pid');
      const postmaster = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : undefined;
      if (postmaster) {
        try {
          process.kill(postmaster, 'SIGINT');
        } catch {
          // gone
        }
      }
      await waitExit(child, 15_000);
    },
  };
}

/** Statement counts from pg_stat_statements, to count database round trips per delivery. */
export async function resetStatementStats(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql`select pg_stat_statements_reset()`;
    await sql`select pg_stat_reset()`;
  } finally {
    await sql.end({ timeout: 2 });
  }
}

export interface StatementStats {
  calls: number;
  total_ms: number;
  transactions_committed: number;
  top: { calls: number; mean_ms: number; total_ms: number; query: string }[];
}

export async function readStatementStats(url: string): Promise<StatementStats> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql<{ calls: string; total: number; mean: number; query: string }[]>`
      select calls::text, total_exec_time as total, mean_exec_time as mean, query
      from pg_stat_statements
      where query not ilike '%pg_stat_statements%' and dbid = (select oid from pg_database where datname = current_database())
      order by calls desc`;
    const [db] = await sql<{ xact_commit: string }[]>`select xact_commit::text from pg_stat_database where datname = current_database()`;
    return {
      calls: rows.reduce((sum, row) => sum + Number(row.calls), 0),
      total_ms: Math.round(rows.reduce((sum, row) => sum + row.total, 0)),
      transactions_committed: Number(db?.xact_commit ?? 0),
      top: rows.slice(0, 25).map((row) => ({
        calls: Number(row.calls),
        mean_ms: Math.round(row.mean * 1000) / 1000,
        total_ms: Math.round(row.total),
        query: row.query.replace(/\s+/g, ' ').slice(0, 160),
      })),
    };
  } finally {
    await sql.end({ timeout: 2 });
  }
}
