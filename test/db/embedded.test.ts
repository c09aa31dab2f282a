import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import postgres from 'postgres';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  EMBEDDED_LOCK_FILE,
  SessionGate,
  spawnEmbeddedPostgres,
  startEmbeddedPostgres,
  type EmbeddedPostgres,
} from '../../src/local/embedded-database.ts';
import { freePort } from '../support/ports.ts';
import { deadlineIn } from '../support/wait.ts';

const run = promisify(execFile);
const PSQL = '/usr/bin/psql';
const projectRoot = path.resolve(import.meta.dirname, '../..');

let tmp: string;
let dataDir: string;
let server: EmbeddedPostgres;
const clients: postgres.Sql[] = [];

/** A client of its own, as another process would have: one connection through the socket. */
function connect(): postgres.Sql {
  const client = postgres(server.url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  clients.push(client);
  return client;
}

/** A frontend message of the wire protocol: its type, its length, its body. */
function wireMessage(type: string, body: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.write(type, 0, 'latin1');
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}
const cstr = (text: string) => Buffer.from(`${text}\0`);
const int16 = (value: number) => Buffer.from([value >> 8, value & 0xff]);
const int32 = (value: number) => {
  const out = Buffer.alloc(4);
  out.writeInt32BE(value);
  return out;
};

const SYNC = wireMessage('S', Buffer.alloc(0));
const FLUSH = wireMessage('H', Buffer.alloc(0));
/** Parse and Bind of `statement` (unnamed statement and portal, no parameters). */
const parseAndBind = (statement: string) => [
  wireMessage('P', Buffer.concat([cstr(''), cstr(statement), int16(0)])),
  wireMessage('B', Buffer.concat([cstr(''), cstr(''), int16(0), int16(0), int16(0)])),
];
const EXECUTE_PORTAL = wireMessage('E', Buffer.concat([cstr(''), int32(0)]));

/** Parse, Bind and Execute of `statement`. */
const execute = (statement: string) => Buffer.concat([...parseAndBind(statement), EXECUTE_PORTAL]);

/** Parse, Bind, Describe (the portal), Execute and Sync of `statement`, as a client sends a query. */
const sequence = (statement: string) =>
  Buffer.concat([...parseAndBind(statement), wireMessage('D', Buffer.concat([Buffer.from('P'), cstr('')])), EXECUTE_PORTAL, SYNC]);

/** The messages of `bytes`, one buffer each (a type byte, then a length that counts itself). */
function splitMessages(bytes: Buffer): Buffer[] {
  const messages: Buffer[] = [];
  for (let offset = 0; offset < bytes.length; offset += 1 + bytes.readInt32BE(offset + 1)) {
    messages.push(bytes.subarray(offset, offset + 1 + bytes.readInt32BE(offset + 1)));
  }
  return messages;
}

/** The type of each message in `bytes`. */
const messageTypes = (bytes: Buffer) => splitMessages(bytes).map((message) => String.fromCharCode(message[0]!));

/** A bare wire-protocol client, to send a message sequence split over several writes as TCP may deliver it. */
async function rawClient(url: string) {
  const { port, hostname } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  await once(socket, 'connect');
  let buffer = Buffer.alloc(0);
  const received: string[] = [];
  let chunks = 0;
  let wake: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    chunks += 1;
    buffer = Buffer.concat([buffer, chunk]);
    while (buffer.length >= 5 && buffer.length >= 1 + buffer.readInt32BE(1)) {
      received.push(String.fromCharCode(buffer[0]!));
      buffer = buffer.subarray(1 + buffer.readInt32BE(1));
    }
    wake?.();
  });
  async function until(type: string): Promise<void> {
    while (!received.includes(type)) await new Promise<void>((resolve) => (wake = resolve));
    received.splice(0, received.indexOf(type) + 1);
  }
  const startupBody = Buffer.concat([int32(196608), cstr('user'), cstr('postgres'), cstr('database'), cstr('postgres'), cstr('')]);
  socket.write(Buffer.concat([int32(startupBody.length + 4), startupBody]));
  await until('Z');
  return {
    /**
     * Parse, Bind and Execute of `statement`, without the Sync that ends the implicit
     * transaction; a Flush asks for the answers so far, as a PostgreSQL server sends them only
     * at a Sync or a Flush.
     */
    async executeWithoutSync(statement: string) {
      socket.write(Buffer.concat([execute(statement), FLUSH]));
      await until('C');
    },
    /** Parse, Bind, Execute and Sync of `statement` in one write; answers how many reads its answers took. */
    async executeWithSync(statement: string): Promise<number> {
      const before = chunks;
      socket.write(Buffer.concat([execute(statement), SYNC]));
      await until('Z');
      return chunks - before;
    },
    async sync() {
      socket.write(SYNC);
      await until('Z');
    },
    close() {
      socket.end(wireMessage('X', Buffer.alloc(0)));
    },
  };
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'embedded-test-'));
  dataDir = path.join(tmp, 'pglite');
  server = await startEmbeddedPostgres(dataDir, await freePort());
  const setup = connect();
  await setup`create table items (id int primary key, label text not null)`;
  await setup`create table counters (id int primary key, v int not null)`;
  await setup`create sequence steps`;
});
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.end({ timeout: 5 })));
});
afterAll(async () => {
  await server?.stop();
  await rm(tmp, { recursive: true, force: true });
});

describe('the embedded database served over the socket', () => {
  it('keeps an open transaction invisible to other clients until it commits, then shows all of it', async () => {
    const a = connect();
    const b = connect();
    await a`delete from items`;
    let bAnswered = false;
    let bAnsweredBeforeCommit: boolean | undefined;
    let aXid = '';
    let aLastStep = 0;
    let bQuery: Promise<postgres.Row> | undefined;

    await a.begin(async (tx) => {
      await tx`insert into items values (1, 'first')`;
      aXid = (await tx`select pg_current_xact_id()::text as xid`)[0]!.xid as string;
      bQuery = b`
        select (select count(*)::int from items) as n,
               pg_current_xact_id_if_assigned()::text as xid,
               nextval('steps')::int as step`.then(([row]) => {
        bAnswered = true;
        return row!;
      });
      // Keep the transaction open and busy: every statement is a chance for B's query to slip in.
      for (let i = 0; i < 20; i += 1) await tx`select pg_sleep(0.005)`;
      await tx`insert into items values (2, 'second')`;
      aLastStep = (await tx`select nextval('steps')::int as step`)[0]!.step as number;
      bAnsweredBeforeCommit = bAnswered;
    });

    const seen = await bQuery!;
    expect(bAnsweredBeforeCommit).toBe(false);
    // B ran after A's last statement, outside A's transaction, and saw both rows: the committed state.
    expect(aXid).toMatch(/^\d+$/);
    expect(seen.step).toBeGreaterThan(aLastStep);
    expect(seen.xid).toBeNull();
    expect(seen.n).toBe(2);
  });

  it('never shows another client a row whose transaction rolled back', async () => {
    const a = connect();
    const b = connect();
    await a`delete from items`;
    let bQuery: Promise<number> | undefined;
    const rolledBack = a
      .begin(async (tx) => {
        await tx`insert into items values (10, 'doomed')`;
        bQuery = b`select count(*)::int as n from items`.then(([row]) => row!.n as number);
        await tx`select pg_sleep(0.05)`;
        throw new Error('roll back');
      })
      .then(
        () => 'committed',
        (error: Error) => error.message,
      );

    expect(await rolledBack).toBe('roll back');
    expect(await bQuery!).toBe(0);
    expect(await b`select count(*)::int as n from items where id = 10`).toEqual([{ n: 0 }]);
  });

  it('loses no update when two clients interleave read-modify-write transactions', async () => {
    const a = connect();
    const b = connect();
    await a`insert into counters values (1, 0) on conflict (id) do update set v = 0`;
    const increment = async (client: postgres.Sql) => {
      for (let i = 0; i < 50; i += 1) {
        await client.begin(async (tx) => {
          const [row] = await tx`select v from counters where id = 1`;
          await tx`update counters set v = ${(row!.v as number) + 1} where id = 1`;
        });
      }
    };

    await Promise.all([increment(a), increment(b)]);

    expect(await a`select v from counters where id = 1`).toEqual([{ v: 100 }]);
  });

  it('keeps a statement whose Sync has not arrived yet invisible to other clients', async () => {
    const b = connect();
    await b`delete from items`;
    const a = await rawClient(server.url);
    try {
      // Postgres runs Parse/Bind/Execute in an implicit transaction that only the Sync ends;
      // a large query split over TCP segments arrives this way.
      await a.executeWithoutSync("insert into items values (50, 'unsynced')");
      let bAnswered = false;
      const bQuery = b`select count(*)::int as n, pg_current_xact_id_if_assigned()::text as xid from items`.then(
        ([row]) => {
          bAnswered = true;
          return row!;
        },
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const bAnsweredBeforeSync = bAnswered;
      await a.sync();

      expect(bAnsweredBeforeSync).toBe(false);
      expect(await bQuery).toEqual({ n: 1, xid: null });
    } finally {
      a.close();
    }
  });

  it("hands a message sequence's answers to the socket at its Sync or Flush, in one piece, as PostgreSQL sends them", async () => {
    const db = new PGlite();
    try {
      const gate = new SessionGate(db);
      await gate.waitReady;
      const written: string[][] = [];
      /** Feeds one client message to the gate, and notes the backend message types of each piece it hands on. */
      const feed = (bytes: Buffer) =>
        gate.execProtocolRawStream(new Uint8Array(bytes), { onRawData: (data) => written.push(messageTypes(Buffer.from(data))) });
      for (const bytes of splitMessages(sequence('select 1'))) await feed(bytes);
      // ParseComplete, BindComplete, a row, CommandComplete and ReadyForQuery: each was a write of its own before.
      expect(written).toEqual([['1', '2', 'T', 'D', 'C', 'Z']]);
      written.length = 0;
      // Every message of the sequence but its Sync.
      for (const bytes of splitMessages(sequence('select 2')).slice(0, -1)) await feed(bytes);
      expect(written).toEqual([]);
      await feed(FLUSH);
      expect(written).toEqual([['1', '2', 'T', 'D', 'C']]);
      await feed(SYNC);
      expect(written).toEqual([['1', '2', 'T', 'D', 'C'], ['Z']]);
    } finally {
      await db.close();
    }
  });

  it("sends a message sequence's answers to the client in one write", async () => {
    const a = await rawClient(server.url);
    try {
      expect(await a.executeWithSync('select 1')).toBe(1);
    } finally {
      a.close();
    }
  });

  it('rolls back the unsynced statement of a client that disconnects and serves the others', async () => {
    const b = connect();
    await b`delete from items`;
    const a = await rawClient(server.url);
    await a.executeWithoutSync("insert into items values (51, 'abandoned')");
    const bQuery = b`select count(*)::int as n from items`;
    a.close();

    expect(await bQuery).toEqual([{ n: 0 }]);
    expect(await b`insert into items values (52, 'after') returning id`).toEqual([{ id: 52 }]);
  });

  it('gives every client the answer to its own queries when many run at once', async () => {
    const pool = Array.from({ length: 6 }, () => connect());
    const answers = await Promise.all(
      Array.from({ length: 120 }, async (_, i) => {
        const client = pool[i % pool.length]!;
        const [row] = await client`select ${i}::int as n, ${`label-${i}`}::text as label`;
        return row;
      }),
    );
    expect(answers).toEqual(Array.from({ length: 120 }, (_, i) => ({ n: i, label: `label-${i}` })));
  });

  it('rolls back the transaction of a client that disconnects in the middle of it and serves the others', async () => {
    const a = connect();
    const b = connect();
    await b`delete from items`;
    const reserved = await a.reserve();
    await reserved`begin`;
    await reserved`insert into items values (20, 'abandoned')`;
    const bQuery = b`select count(*)::int as n from items`;
    // The process holding the transaction goes away without committing.
    await a.end({ timeout: 0 });

    expect(await bQuery).toEqual([{ n: 0 }]);
    expect(await b`insert into items values (21, 'after') returning id`).toEqual([{ id: 21 }]);
  });

  it('accepts psql, the client drizzle-kit and people use, on the same URL', async (context) => {
    if (!existsSync(PSQL)) context.skip();
    // Asynchronous on purpose: the server runs in this process and must keep answering.
    const { stdout } = await run(PSQL, [server.url, '-XtAc', 'select 1 + 1'], { timeout: 30_000 });
    expect(stdout.trim()).toBe('2');
  });

  it('refuses a second process on the same data folder and keeps serving the first', async () => {
    const a = connect();
    await a`insert into items values (30, 'kept') on conflict (id) do nothing`;
    expect((await readFile(path.join(dataDir, EMBEDDED_LOCK_FILE), 'utf8')).trim()).toMatch(new RegExp(`^${process.pid} \\d+ ${process.ppid}$`));

    // `npm run migrate` while `npm start` runs, with another PGLITE_PORT: it must not open the files.
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: tmp, PGLITE_PORT: String(await freePort()) };
    delete env.DATABASE_URL;
    delete env.TEMPORAL_ADDRESS;
    const result = await run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'migrate'], {
      cwd: projectRoot,
      env,
      timeout: 60_000,
    }).then(
      () => ({ code: 0, output: '' }),
      (error: { code?: number; stdout?: string; stderr?: string }) => ({
        code: error.code,
        output: `${error.stdout ?? ''}${error.stderr ?? ''}`,
      }),
    );

    expect(result.code).toBe(1);
    expect(result.output).toContain(`in use by process ${process.pid}`);
    expect(await a`select label from items where id = 30`).toEqual([{ label: 'kept' }]);
  }, 120_000);

  it('keeps the data when the server stops and starts again on the same folder, past a stale lock', async () => {
    const a = connect();
    await a`insert into items values (40, 'durable') on conflict (id) do nothing`;
    await Promise.all(clients.splice(0).map((client) => client.end({ timeout: 5 })));
    await server.stop();
    expect(existsSync(path.join(dataDir, EMBEDDED_LOCK_FILE))).toBe(false);
    // A lock left by a killed process whose pid now belongs to another process (a container restart).
    await writeFile(path.join(dataDir, EMBEDDED_LOCK_FILE), '1 999999999999\n');

    server = await startEmbeddedPostgres(dataDir, await freePort());

    const b = connect();
    expect(await b`select label from items where id = 40`).toEqual([{ label: 'durable' }]);
  });
});

describe('the embedded database process (what `npm start` runs)', () => {
  /** Polls until process `pid` has exited. */
  async function waitGone(pid: number, timeoutMs = 30_000): Promise<boolean> {
    for (const deadline = deadlineIn(timeoutMs); !deadline.passed(); ) {
      try {
        process.kill(pid, 0);
      } catch {
        return true;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return false;
  }

  it('serves the folder from a process of its own and ends it, lock and port included, on stop()', async () => {
    const folder = path.join(tmp, 'spawned');
    const port = await freePort();
    const spawned = await spawnEmbeddedPostgres(folder, port);
    expect(spawned.pid).not.toBe(process.pid);
    expect((await readFile(path.join(folder, EMBEDDED_LOCK_FILE), 'utf8')).split(' ')[0]).toBe(String(spawned.pid));
    // The folder was new: a short-lived process ran initdb, whose memory (about 800 MB) this
    // long-lived one, having only opened the files, does not carry (about 290 MB).
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${spawned.pid}/status`, 'utf8'))![1]);
    expect(rssKb / 1024).toBeLessThan(600);
    const client = postgres(spawned.url, { max: 1, onnotice: () => {} });
    try {
      expect(await client`select 40 + 2 as answer`).toEqual([{ answer: 42 }]);
    } finally {
      await client.end({ timeout: 5 });
    }

    await spawned.stop();

    expect(await waitGone(spawned.pid, 1_000)).toBe(true);
    expect(existsSync(path.join(folder, EMBEDDED_LOCK_FILE))).toBe(false);
    const probe = net.connect(port, '127.0.0.1');
    const [error] = (await once(probe, 'error')) as [NodeJS.ErrnoException];
    expect(error.code).toBe('ECONNREFUSED');
  }, 120_000);

  it('closes the database by itself when the process that spawned it is killed with SIGKILL', async () => {
    const folder = path.join(tmp, 'orphaned');
    // A parent of its own to kill: it spawns the database process and prints its pid and URL.
    const script = path.join(tmp, 'spawning-parent.mts');
    await writeFile(
      script,
      `import { spawnEmbeddedPostgres } from ${JSON.stringify(path.join(projectRoot, 'src/local/embedded-database.ts'))};
      const spawned = await spawnEmbeddedPostgres(${JSON.stringify(folder)}, ${await freePort()});
      console.log(JSON.stringify({ pid: spawned.pid, url: spawned.url }));
      setInterval(() => {}, 1000);`,
    );
    const parent = spawn(process.execPath, ['--import', 'tsx', script], { cwd: projectRoot, stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = (await Promise.race([
      once(parent.stdout!, 'data'),
      once(parent, 'exit').then(([code]) => Promise.reject(new Error(`the spawning parent exited (${code})`))),
    ])) as [Buffer];
    const { pid, url } = JSON.parse(line.toString()) as { pid: number; url: string };
    const writer = postgres(url, { max: 1, onnotice: () => {} });
    await writer`create table kept (v text)`;
    await writer`insert into kept values ('written before the crash')`;
    await writer.end({ timeout: 5 });

    parent.kill('SIGKILL');

    expect(await waitGone(pid)).toBe(true);
    expect(existsSync(path.join(folder, EMBEDDED_LOCK_FILE))).toBe(false);
    const reopened = await startEmbeddedPostgres(folder, await freePort());
    const client = postgres(reopened.url, { max: 1, onnotice: () => {} });
    try {
      expect(await client`select v from kept`).toEqual([{ v: 'written before the crash' }]);
    } finally {
      await client.end({ timeout: 5 });
      await reopened.stop();
    }
  }, 120_000);
});
