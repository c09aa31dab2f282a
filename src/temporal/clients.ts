/**
 * Temporal clients on connections made from the configuration (src/temporal/connection.ts): the
 * service's, on the native connection its worker shares, and a short-lived one for commands.
 */
import { Client, Connection, type ClientInterceptors } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { connectToTemporal, type TemporalConnectionSettings } from './connection.ts';

/** Where a client connects: TEMPORAL_ADDRESS (or the dev server's) and the connection settings. */
export interface TemporalTarget {
  address: string;
  settings: TemporalConnectionSettings;
  namespace: string;
}

/**
 * The service's client on one native (Rust core) connection, which a worker in the same process
 * shares: workflow starts cost no JavaScript gRPC stack, and that worker takes their first task
 * eagerly. Close the connection when the process stops.
 */
export async function connectServiceClient(target: TemporalTarget, interceptors?: ClientInterceptors): Promise<{ connection: NativeConnection; client: Client }> {
  // Loaded here, so that a command's client does not load the worker's native bridge.
  const { NativeConnection } = await import('@temporalio/worker');
  const connection = await connectToTemporal(target.address, target.settings, (options) => NativeConnection.connect(options));
  const client = new Client({ connection, namespace: target.namespace, ...(interceptors ? { interceptors } : {}) });
  return { connection, client };
}

/** A client for a command-line call, giving up after `connectTimeoutMs` without a connection. */
export async function connectCommandClient(target: TemporalTarget, connectTimeoutMs: number): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await connectToTemporal(target.address, target.settings, (options) => Connection.connect({ ...options, connectTimeout: connectTimeoutMs }));
  return { client: new Client({ connection, namespace: target.namespace }), close: () => connection.close() };
}
