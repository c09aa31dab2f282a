import { portIsFree } from '../../src/local/cluster/processes.ts';

/**
 * A TCP port free on 127.0.0.1 right now, between 10000 and 20000: below the kernel's ephemeral
 * range (32768 and up on Linux), so that a port the system hands out before the caller binds this
 * one (a server listening on port 0, an outgoing connection) cannot be it, and apart from
 * {@link freePortBlock}'s range.
 */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 200; tries += 1) {
    const port = 10_000 + Math.floor(Math.random() * 10_000);
    if (await portIsFree(port)) return port;
  }
  throw new Error('no free port found between 10000 and 20000');
}

/**
 * `size` consecutive TCP ports free on 127.0.0.1 right now, all below 32768 (the Temporal server
 * stores its membership ports in a smallint column); returns the first.
 */
export async function freePortBlock(size: number): Promise<number> {
  for (let tries = 0; tries < 200; tries += 1) {
    const first = 20_000 + Math.floor(Math.random() * (12_000 - size));
    const free = await Promise.all(Array.from({ length: size }, (_, i) => portIsFree(first + i)));
    if (free.every(Boolean)) return first;
  }
  throw new Error(`no block of ${size} free ports found`);
}
