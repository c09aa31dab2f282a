import { availableParallelism } from 'node:os';
import { portIsFree } from '../../src/local/cluster/processes.ts';

const FIRST_PORT = 10_000;
// One slice for each vitest worker (their pool ids run up to the cores less one; see
// vitest.config.ts) and one for the main process, which has no pool id: at least 16.
const SLICES = Math.max(16, availableParallelism() + 1);
const SLICE_SIZE = Math.floor(10_000 / SLICES);
// Each process draws from a slice of its own: a port one file has picked but whose server has not
// bound it yet (a service takes seconds to start) must not be picked by a file running beside it.
// The cursor walks the slice from a random start, so one process does not hand out a port twice
// until it has gone round its slice (625 ports on up to 15 cores).
const slice = Number(process.env.VITEST_POOL_ID ?? 0) % SLICES;
let cursor = Math.floor(Math.random() * SLICE_SIZE);

/**
 * A TCP port free on 127.0.0.1 right now, between 10000 and 20000: below the kernel's ephemeral
 * range (32768 and up on Linux), so that a port the system hands out before the caller binds this
 * one (a server listening on port 0, an outgoing connection) cannot be it, and apart from
 * {@link freePortBlock}'s range. Processes running side by side under vitest draw from disjoint
 * slices of the range, and successive calls in one process return different ports, so callers may
 * pick several ports before binding any.
 */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < SLICE_SIZE; tries += 1) {
    cursor = (cursor + 1) % SLICE_SIZE;
    const port = FIRST_PORT + slice * SLICE_SIZE + cursor;
    if (await portIsFree(port)) return port;
  }
  throw new Error(`no free port found between ${FIRST_PORT + slice * SLICE_SIZE} and ${FIRST_PORT + (slice + 1) * SLICE_SIZE - 1}`);
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
