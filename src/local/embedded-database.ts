import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeArgsForChild } from '../node-child.ts';

/** A PGlite database served over the Postgres wire protocol on a loopback port. */
export interface EmbeddedPostgres {
  /** Connection URL for postgres.js, psql or drizzle-kit. */
  readonly url: string;
  stop(): Promise<void>;
}

type StreamOptions = NonNullable<Parameters<PGlite['execProtocolRawStream']>[1]>;

const SYNC_MESSAGE = new Uint8Array([0x53, 0, 0, 0, 4]); // 'S', length 4
const ROLLBACK_MESSAGE = new Uint8Array([0x51, 0, 0, 0, 13, ...Buffer.from('ROLLBACK\0')]); // 'Q', length 13
const READY_FOR_QUERY = 0x5a; // 'Z'
const IDLE = 0x49; // 'I'
/** Parse, Bind, Describe, Execute, Close: extended-protocol messages whose answers PostgreSQL sends at the next Sync or Flush. */
const ANSWERED_AT_SYNC = new Set([0x50, 0x42, 0x44, 0x45, 0x43]);

/**
 * What pglite-socket's multiplexer sees of the database. Its queue hands PGlite one client
 * message at a time and, while `isInTransaction()` is true, only messages of the client it
 * served last. PGlite's own answer covers explicit transaction blocks only, so the queue
 * would let other clients' messages in between a client's Parse/Bind/Execute and its Sync:
 * into that client's implicit transaction (seeing and committing its uncommitted rows) and
 * over its unnamed statement and portal. This gate instead keeps the session with a client
 * from its first message until the server answers ReadyForQuery with status idle, which
 * covers both cases (and COPY, cursors and failed transactions).
 */
export class SessionGate {
  readonly #db: PGlite;
  /** The client served last has a message sequence or a transaction in progress. */
  #held = false;
  /**
   * Answers held for the client being served until its Sync or Flush, as PostgreSQL's own
   * server holds them: pglite-socket writes each message's answer to the socket as it comes,
   * so a prepared statement's Bind, Execute and Sync were three writes.
   */
  #unsent: Uint8Array[] = [];

  constructor(db: PGlite) {
    this.#db = db;
  }

  get waitReady(): Promise<void> {
    return this.#db.waitReady;
  }

  isInTransaction(): boolean {
    return this.#held || this.#db.isInTransaction();
  }

  runExclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.#db.runExclusive(fn);
  }

  async execProtocolRawStream(message: Uint8Array, options: StreamOptions): Promise<void> {
    // Held from the first message on; released by the ReadyForQuery(idle) that ends a Sync,
    // a simple Query or the startup packet.
    this.#held = true;
    let pending = new Uint8Array(0);
    let lastStatus: number | undefined;
    await this.#db.execProtocolRawStream(message, {
      ...options,
      onRawData: (data: Uint8Array) => {
        // A copy: PGlite may hand out a view of memory it reuses.
        this.#unsent.push(data.slice());
        // Walk the backend messages (type byte, int32 length) to find the last ReadyForQuery.
        const bytes = pending.length > 0 ? concat(pending, data) : data;
        let offset = 0;
        while (bytes.length - offset >= 5) {
          const length = readInt32(bytes, offset + 1);
          if (bytes.length - offset < 1 + length) break;
          if (bytes[offset] === READY_FOR_QUERY && length === 5) lastStatus = bytes[offset + 5];
          offset += 1 + length;
        }
        pending = bytes.slice(offset);
      },
    });
    if (lastStatus !== undefined) this.#held = lastStatus !== IDLE;
    if (!ANSWERED_AT_SYNC.has(message[0]!) && this.#unsent.length > 0) {
      const answers = this.#unsent.length === 1 ? this.#unsent[0]! : Buffer.concat(this.#unsent);
      this.#unsent = [];
      options.onRawData(answers);
    }
  }

  /** Used by the queue only to abandon the work of a client that disconnected. */
  async exec(_query: string): Promise<void> {
    this.#unsent = [];
    // A ROLLBACK as a simple query aborts an implicit transaction too (a Sync would commit
    // it); after an extended-protocol error the server skips it, and the Sync ends the
    // failed sequence. What is left then is a failed explicit block.
    await this.#db.runExclusive(async () => {
      await this.#db.execProtocolRawStream(ROLLBACK_MESSAGE, { onRawData: () => {} });
      await this.#db.execProtocolRawStream(SYNC_MESSAGE, { onRawData: () => {} });
    });
    if (this.#db.isInTransaction()) await this.#db.exec('ROLLBACK');
    this.#held = false;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function readInt32(bytes: Uint8Array, offset: number): number {
  return ((bytes[offset]! << 24) | (bytes[offset + 1]! << 16) | (bytes[offset + 2]! << 8) | bytes[offset + 3]!) >>> 0;
}

/** Name of the lock file kept in the data folder while a process has the database open. */
export const EMBEDDED_LOCK_FILE = 'webhooks-embedded.lock';

/** Data folders this process has open (a pid in a lock file may be our own from a previous life). */
const openHere = new Set<string>();

/** Start time of process `pid` (Linux: clock ticks since boot), or '' where /proc is missing. */
async function startTime(pid: number): Promise<string> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // Fields after the command name, which is in parentheses and may contain spaces; starttime is field 22.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
}

/** Whether process `pid`, started at `started` (when known), still runs; a reused pid does not count. */
async function isRunning(pid: number, started = ''): Promise<boolean> {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // After a container restart the pid may belong to another process now.
  const current = await startTime(pid);
  return !started || !current || current === started;
}

/** How long a lock owner whose parent is gone gets to finish closing the database. */
const ORPHAN_CLOSE_WAIT_MS = 30_000;

/**
 * Whether the process that wrote a lock (`pid start-time parent-pid`) still holds the database.
 * An owner whose parent is gone is closing by design (the embedded server stops when the
 * service that spawned it dies, even by SIGKILL), so it is given time to finish.
 */
async function isHeld(owner: string): Promise<boolean> {
  const [pidText, started = '', parentText = ''] = owner.trim().split(' ');
  const pid = Number(pidText);
  if (pid === process.pid || !(await isRunning(pid, started))) return false;
  const parent = Number(parentText);
  if (!parent || parent === process.pid || (await isRunning(parent))) return true;
  for (let waited = 0; waited < ORPHAN_CLOSE_WAIT_MS; waited += 100) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (!(await isRunning(pid, started))) return false;
  }
  return true;
}

/**
 * Takes the data folder for this process. PGlite has no lock of its own: a second PGlite
 * on the same files, even one that only opens and closes them, crashes the first and
 * corrupts the database. The lock holds the owner's pid, start time and parent pid; a lock
 * left by a process that is gone is taken over.
 */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const dir = path.resolve(dataDir);
  const lockFile = path.join(dir, EMBEDDED_LOCK_FILE);
  if (openHere.has(dir)) throw new Error(`the embedded database in ${dir} is already open in this process`);
  for (let attempt = 0; ; attempt += 1) {
    try {
      await writeFile(lockFile, `${process.pid} ${await startTime(process.pid)} ${process.ppid}\n`, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw lockedError(dir, error);
    }
    const owner = await readFile(lockFile, 'utf8').catch(() => '');
    if (await isHeld(owner)) {
      throw new Error(
        `the embedded database in ${dir} is in use by process ${owner.trim().split(' ')[0]} (is \`npm start\` running? ` +
          'stop it first, or use another DATA_DIR)',
      );
    }
    await rm(lockFile, { force: true }); // left behind by a process that died
  }
  openHere.add(dir);
  return async () => {
    openHere.delete(dir);
    await rm(lockFile, { force: true });
  };
}

function lockedError(dir: string, cause: unknown): Error {
  return new Error(`cannot lock the embedded database in ${dir}: ${String(cause)}`);
}

/** Creates the PGlite database files in `dataDir` (initdb) if they do not exist, and closes it. */
export async function createEmbeddedDatabase(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true });
  const unlock = await lockDataDir(dataDir);
  try {
    await (await PGlite.create(dataDir)).close();
  } finally {
    await unlock();
  }
}

/**
 * Opens the PGlite database in `dataDir` and serves it on `127.0.0.1:port`.
 *
 * PGlite is a single-session database. Every client, the service's own pool included,
 * connects through this one socket server: its multiplexer runs one message at a time and,
 * while a client has a transaction or an unfinished message sequence, runs only that
 * client's messages (see {@link SessionGate}), so each transaction stays isolated from
 * every other client. The data folder is locked to this process while it is open.
 */
export async function startEmbeddedPostgres(dataDir: string, port: number): Promise<EmbeddedPostgres> {
  await mkdir(dataDir, { recursive: true });
  const unlock = await lockDataDir(dataDir);
  let db: PGlite;
  try {
    db = await PGlite.create(dataDir);
  } catch (error) {
    await unlock();
    throw error;
  }
  // The socket server uses only the part of PGlite that SessionGate has.
  const gate = new SessionGate(db) as unknown as PGlite;
  const server = new PGLiteSocketServer({ db: gate, host: '127.0.0.1', port, maxConnections: 100 });
  try {
    await server.start();
  } catch (error) {
    await db.close();
    await unlock();
    throw new Error(
      `cannot serve the embedded database on 127.0.0.1:${port} (is another instance running? set PGLITE_PORT): ${String(error)}`,
    );
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async stop() {
      try {
        await server.stop();
        await db.close();
      } finally {
        await unlock();
      }
    },
  };
}

/** What the embedded server process tells its parent. */
export type EmbeddedServerMessage =
  | { type: 'ready'; url: string }
  | { type: 'created' }
  | { type: 'failed'; message: string };

/** A running embedded server process. */
export interface EmbeddedPostgresProcess extends EmbeddedPostgres {
  readonly pid: number;
}

const SERVER_ENTRY = fileURLToPath(new URL('./embedded-database-server.ts', import.meta.url));
const STOP_TIMEOUT_MS = 30_000;

/** What `embedded-server.ts` takes as its argument. */
export type EmbeddedServerArgs = { dataDir: string; port: number } | { dataDir: string; createOnly: true };

/** Forks `embedded-server.ts`; `reply` is its first message, or a failure if it exits first. */
function forkServer(args: EmbeddedServerArgs) {
  const child = fork(SERVER_ENTRY, [JSON.stringify(args)], {
    execArgv: nodeArgsForChild(),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const reply = new Promise<EmbeddedServerMessage>((resolve) => {
    child.once('message', (message: EmbeddedServerMessage) => resolve(message));
    child.once('error', (error) => resolve({ type: 'failed', message: error.message }));
    void exited.then(() => resolve({ type: 'failed', message: `the embedded database process exited (${child.exitCode ?? child.signalCode})` }));
  });
  return { child, reply, exited };
}

/**
 * Serves the PGlite database of `dataDir` on `127.0.0.1:port` from a child process of its
 * own ({@link startEmbeddedPostgres} run by `embedded-server.ts`): PGlite's single-threaded
 * WebAssembly Postgres then neither competes with the API and the worker for this process's
 * event loop nor counts in its memory. The child stops when `stop()` is called or when this
 * process goes away, however it dies; terminal signals are left to this process.
 */
export async function spawnEmbeddedPostgres(dataDir: string, port: number): Promise<EmbeddedPostgresProcess> {
  // PGlite keeps the memory its initdb grew to: about 800 MB of RSS, against about 290 MB
  // when it opens existing files. A new database is therefore created by a short-lived
  // process first, and the long-lived one only ever opens it.
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    const creator = forkServer({ dataDir, createOnly: true });
    const created = await creator.reply;
    await creator.exited;
    if (created.type === 'failed') throw new Error(created.message);
  }
  const { child, reply, exited } = forkServer({ dataDir, port });
  const message = await reply;
  if (message.type !== 'ready') {
    child.kill('SIGKILL');
    throw new Error(message.type === 'failed' ? message.message : `the embedded database process answered ${message.type}`);
  }
  return {
    url: message.url,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const force = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      child.disconnect();
      await exited;
      clearTimeout(force);
    },
  };
}
