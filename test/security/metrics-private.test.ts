import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { startHarness, type Harness } from '../support/harness.ts';

/*
 * Finding: /metrics, with per-webhook failure figures, was served without authentication on
 * the API's own port. Every role now serves it on a port of its own (METRICS_PORT), bound to
 * loopback unless METRICS_HOST says otherwise. test/runtime.test.ts checks the running service
 * (one /metrics, on its port), test/compose.test.ts the containers.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.stop());

describe('/metrics', () => {
  it('is not served on the API port', async () => {
    const response = await h.request('GET', '/metrics');
    expect(response.status).toBe(404);
    expect(response.body.error.code).toBe('not_found');
    expect(response.text).not.toContain('webhook_');
  });

  it('is served on METRICS_PORT bound to loopback by default', () => {
    const { metrics, http } = parseConfig({ HOST: '0.0.0.0' });
    expect(metrics.host).toBe('127.0.0.1');
    expect(metrics.port).not.toBe(http.port);
    expect(parseConfig({ METRICS_HOST: '0.0.0.0' }).metrics.host).toBe('0.0.0.0');
  });
});
