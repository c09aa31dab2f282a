/**
 * src/temporal/connection.ts against the run's plaintext Temporal server (the dev server, or the
 * TEMPORAL_ADDRESS of test/global-setup.ts): the TLS side of it, against a frontend that requires
 * mutual TLS, is in the production topology's suite (test/cluster/topology.test.ts, CLUSTER_TLS).
 */
import { Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';
import { ConfigError, parseConfig } from '../src/config.ts';
import { connectToTemporal } from '../src/temporal/connection.ts';
import { freePort } from './support/ports.ts';

const address = inject('temporalAddress');
const settings = (env: NodeJS.ProcessEnv) => parseConfig({ TEMPORAL_ADDRESS: address, ...env }).temporal;

describe('connectToTemporal', () => {
  it('connects the client and the worker connection in plaintext when no TEMPORAL_TLS variable is set', async () => {
    const client = await connectToTemporal(address, settings({}), (options) => Connection.connect(options));
    const worker = await connectToTemporal(address, settings({}), (options) => NativeConnection.connect(options));
    try {
      expect((await client.workflowService.getSystemInfo({})).serverVersion).toMatch(/^\d+\.\d+/);
      expect((await worker.workflowService.getSystemInfo({})).serverVersion).toMatch(/^\d+\.\d+/);
    } finally {
      await Promise.all([client.close(), worker.close()]);
    }
  });

  it('says that the server does not speak TLS, naming the variables, when TEMPORAL_TLS asks for it', async () => {
    const attempt = connectToTemporal(address, settings({ TEMPORAL_TLS: 'true' }), (options) => NativeConnection.connect(options));

    await expect(attempt).rejects.toThrow(ConfigError);
    await expect(attempt).rejects.toThrow(`cannot connect to Temporal at ${address} (TEMPORAL_ADDRESS): the server does not speak TLS there`);
    await expect(attempt).rejects.toThrow(/unset TEMPORAL_TLS and the TEMPORAL_TLS_\* variables/);
  });

  it("keeps the SDK's own error when nothing listens at the address", async () => {
    const nowhere = `127.0.0.1:${await freePort()}`;
    const attempt = connectToTemporal(nowhere, settings({ TEMPORAL_TLS: 'true' }), (options) => NativeConnection.connect(options));

    await expect(attempt).rejects.toThrow();
    await expect(attempt).rejects.not.toBeInstanceOf(ConfigError);
  });
});
