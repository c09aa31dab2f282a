import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** A TCP proxy in front of a PostgreSQL server that can lose the answer of one statement. */
export interface AnswerLosingProxy {
  /** The database's URL through the proxy. */
  url: string;
  /**
   * Loses the answer of the next statement, asked while no statement runs: the server runs it and
   * commits, then the client's connection closes before a byte of the answer reaches it, as when
   * a network fails between a commit and its answer. Resolves once an answer has been lost.
   */
  loseNextAnswer(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Reads a connection's answers, PostgreSQL backend messages (a type byte, then a length that
 * counts itself), and passes each on once whole, until a statement completes (CommandComplete):
 * from there it holds everything back, and the answer is lost once the statement's implicit
 * transaction has ended (the ReadyForQuery that follows).
 */
class AnswerHolder {
  private pending = Buffer.alloc(0);
  private completed = false;

  /** Takes `chunk`; answers the bytes to pass on, or `lost` once a completed statement has committed. */
  push(chunk: Buffer): Buffer | 'lost' {
    this.pending = Buffer.concat([this.pending, chunk]);
    let offset = 0;
    let passOn = 0;
    while (this.pending.length - offset >= 5) {
      const end = offset + 1 + this.pending.readInt32BE(offset + 1);
      if (this.pending.length < end) break;
      const type = String.fromCharCode(this.pending[offset]!);
      if (type === 'C') this.completed = true;
      if (type === 'Z' && this.completed) return 'lost';
      if (!this.completed) passOn = end;
      offset = end;
    }
    const passed = this.pending.subarray(0, passOn);
    this.pending = this.pending.subarray(passOn);
    return passed;
  }
}

/** Starts an {@link AnswerLosingProxy} on 127.0.0.1 in front of the server of `databaseUrl`. */
export async function startAnswerLosingProxy(databaseUrl: string): Promise<AnswerLosingProxy> {
  const target = new URL(databaseUrl);
  const sockets = new Set<net.Socket>();
  let armed: (() => void) | undefined;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    let holder: AnswerHolder | undefined;
    upstream.on('data', (chunk: Buffer) => {
      // Armed while its connections are idle, the first data after is the start of an answer.
      if (!holder && armed) holder = new AnswerHolder();
      if (!holder) {
        client.write(chunk);
        return;
      }
      const passed = holder.push(chunk);
      if (passed !== 'lost') {
        client.write(passed);
        return;
      }
      const lost = armed!;
      armed = undefined;
      end();
      lost();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(databaseUrl);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as AddressInfo).port);
  return {
    url: proxied.toString(),
    loseNextAnswer: () => new Promise<void>((resolve) => (armed = resolve)),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
