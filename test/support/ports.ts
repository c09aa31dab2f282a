import { createServer } from 'node:net';
import { portIsFree } from '../../src/local/cluster/processes.ts';

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
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
