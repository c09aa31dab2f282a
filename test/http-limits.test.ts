import type { ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS, startHttpServer } from '../src/http-server.ts';

let server: ServerType;
let port: number;

/** Sends raw bytes and resolves with everything the server sent back before closing. */
function exchange(payload: string, options: { holdOpenMs?: number } = {}): Promise<{ text: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => socket.write(payload));
    let text = '';
    socket.on('data', (chunk) => (text += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve({ text, closedAfterMs: Date.now() - started }));
    if (options.holdOpenMs) setTimeout(() => socket.destroy(), options.holdOpenMs);
  });
}

beforeAll(async () => {
  const app = new Hono().get('/', (c) => c.text('ok')).post('/', async (c) => c.text(await c.req.text()))
    .onError((_error, c) => c.text('request aborted', 400));
  server = await startHttpServer(app.fetch, {
    port: 0,
    host: '127.0.0.1',
    limits: { headersTimeoutMs: 1_000, requestTimeoutMs: 2_000, keepAliveTimeoutMs: 1_000 },
  });
  const address = server.address();
  port = typeof address === 'object' && address ? address.port : 0;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe('the API server limits', () => {
  it('has production defaults for head size and every timeout', () => {
    expect(DEFAULT_HTTP_LIMITS).toEqual({
      maxHeaderBytes: 16_384,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
    });
  });

  it('answers 431 to a request head larger than the limit', async () => {
    const { text } = await exchange(`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(text).toMatch(/^HTTP\/1\.1 431 /);
  });

  it('drops a client that sends its headers too slowly', async () => {
    const { text, closedAfterMs } = await exchange('GET / HTTP/1.1\r\nHost: x\r\n', { holdOpenMs: 20_000 });
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(closedAfterMs).toBeLessThan(15_000);
  });

  it('drops a client that never finishes its body', async () => {
    const { text } = await exchange('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc', { holdOpenMs: 20_000 });
    expect(text).toMatch(/HTTP\/1\.1 408 /);
  });

  it('closes an idle kept-alive connection after the keep-alive timeout', async () => {
    const { text, closedAfterMs } = await exchange('GET / HTTP/1.1\r\nHost: x\r\n\r\n', { holdOpenMs: 20_000 });
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toMatch(/Keep-Alive: timeout=1/i);
    expect(closedAfterMs).toBeLessThan(15_000);
  });
});
