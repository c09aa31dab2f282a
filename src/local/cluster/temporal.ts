/**
 * The topology's Temporal: the server (`temporal-server` v1.29.1) on the cluster's PostgreSQL
 * with deploy/temporal/server/production.yaml, its bootstrap (deploy/temporal/bootstrap.sh),
 * and the standalone Web UI with deploy/temporal/ui/production.yaml: the files and the script
 * docker-compose.yml runs. With CLUSTER_TLS, the frontend requires mutual TLS, with the
 * certificates of deploy/temporal/make-certificates.sh, and every client presents the client one.
 */
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { TEMPORAL_SCHEMA_DIR } from '../temporal-tools.mjs';
import { parseConfig } from '../../config.ts';
import { temporalConnectionOptions, type TemporalConnectionOptions } from '../../temporal/connection.ts';
import { DEPLOY_DIR, REPO_ROOT, type ClusterLayout } from './layout.ts';
import type { Credentials } from './postgres.ts';
import { isRunning, runLogged, spawnDetached, tail, waitUntil, type ProcessRecord } from './processes.ts';

const TEMPORAL_DEPLOY_DIR = path.join(DEPLOY_DIR, 'temporal');
const BOOTSTRAP = path.join(TEMPORAL_DEPLOY_DIR, 'bootstrap.sh');
const MAKE_CERTIFICATES = path.join(TEMPORAL_DEPLOY_DIR, 'make-certificates.sh');
/**
 * The name clients check the frontend's certificate for (it names 127.0.0.1 and localhost): with
 * the IP address, the SDK's gRPC client would set it as the TLS server name, which Node warns of.
 */
const FRONTEND_SERVER_NAME = 'localhost';
const READY_TIMEOUT_MS = 120_000;

/** Paths of the pinned binaries (scripts/temporal-tools.mjs). */
export type TemporalBinaries = Record<'temporal' | 'temporal-server' | 'temporal-sql-tool' | 'temporal-ui-server', string>;

/** Only what the tools need: the server takes its whole configuration from these variables. */
function baseEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, ...extra };
}

function databaseEnv(layout: ClusterLayout, credentials: Credentials): NodeJS.ProcessEnv {
  return {
    POSTGRES_SEEDS: '127.0.0.1',
    DB_PORT: String(layout.postgres.port),
    POSTGRES_USER: 'temporal',
    POSTGRES_PWD: credentials.temporal,
  };
}

/** Makes the CA, the frontend's certificate and the client certificate, once (make-certificates.sh keeps valid ones). */
export function makeCertificates(layout: ClusterLayout, logFile: string): Promise<void> {
  if (!layout.tls) return Promise.resolve();
  return runLogged('sh', [MAKE_CERTIFICATES, layout.tls.dir, '127.0.0.1', 'localhost'], { env: baseEnv({}), logFile, timeoutMs: 60_000 });
}

/**
 * What a client of the topology's Temporal sets: TEMPORAL_ADDRESS and, with CLUSTER_TLS, the
 * TEMPORAL_TLS_* variables of the client certificate, which the service's replicas, the Temporal
 * CLI (the bootstrap) and the Web UI's config file all read.
 */
export function temporalClientEnv(layout: ClusterLayout): Record<string, string> {
  return {
    TEMPORAL_ADDRESS: layout.temporal.address,
    ...(layout.tls && {
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: layout.tls.caCert,
      TEMPORAL_TLS_CLIENT_CERT_PATH: layout.tls.clientCert,
      TEMPORAL_TLS_CLIENT_KEY_PATH: layout.tls.clientKey,
      TEMPORAL_TLS_SERVER_NAME: FRONTEND_SERVER_NAME,
    }),
  };
}

/** The server's side of CLUSTER_TLS, in the variables of deploy/temporal/server/production.yaml. */
function serverTlsEnv(layout: ClusterLayout): NodeJS.ProcessEnv {
  if (!layout.tls) return {};
  return {
    TEMPORAL_TLS_FRONTEND_CERT: layout.tls.serverCert,
    TEMPORAL_TLS_FRONTEND_KEY: layout.tls.serverKey,
    TEMPORAL_TLS_REQUIRE_CLIENT_AUTH: 'true',
    TEMPORAL_TLS_CLIENT1_CA_CERT: layout.tls.caCert,
    TEMPORAL_TLS_SERVER_CA_CERT: layout.tls.caCert,
    TEMPORAL_TLS_FRONTEND_SERVER_NAME: FRONTEND_SERVER_NAME,
    TEMPORAL_TLS_SYSTEM_WORKER_CERT: layout.tls.clientCert,
    TEMPORAL_TLS_SYSTEM_WORKER_KEY: layout.tls.clientKey,
  };
}

/** `bootstrap.sh schema`: Temporal's databases and every schema version not applied yet. */
export function setUpSchema(layout: ClusterLayout, credentials: Credentials, bins: TemporalBinaries, logFile: string): Promise<void> {
  return runLogged('sh', [BOOTSTRAP, 'schema'], {
    env: baseEnv({
      ...databaseEnv(layout, credentials),
      TEMPORAL_SQL_TOOL: bins['temporal-sql-tool'],
      TEMPORAL_SCHEMA_DIR,
    }),
    logFile,
    timeoutMs: 180_000,
  });
}

/** `bootstrap.sh namespace`: the namespace with its retention, and the search attributes. */
export function setUpNamespace(layout: ClusterLayout, namespace: string, bins: TemporalBinaries, logFile: string): Promise<void> {
  return runLogged('sh', [BOOTSTRAP, 'namespace'], {
    env: baseEnv({ ...temporalClientEnv(layout), TEMPORAL_NAMESPACE: namespace, TEMPORAL_CLI: bins.temporal }),
    logFile,
    timeoutMs: 180_000,
  });
}

/** Starts the server with every service (frontend, history, matching, worker) in one process. */
export function startTemporalServer(
  layout: ClusterLayout,
  credentials: Credentials,
  bins: TemporalBinaries,
  historyShards: number,
  logFile: string,
): ProcessRecord {
  const { ports } = layout.temporal;
  return spawnDetached(
    'temporal',
    0,
    bins['temporal-server'],
    ['--root', TEMPORAL_DEPLOY_DIR, '--config', 'server', '--env', 'production', '--allow-no-auth', 'start'],
    {
      cwd: REPO_ROOT,
      logFile,
      env: baseEnv({
        ...databaseEnv(layout, credentials),
        ...serverTlsEnv(layout),
        NUM_HISTORY_SHARDS: String(historyShards),
        BIND_ON_IP: '127.0.0.1',
        FRONTEND_GRPC_PORT: String(ports.frontend),
        FRONTEND_HTTP_PORT: String(ports.frontendHttp),
        FRONTEND_MEMBERSHIP_PORT: String(ports.frontendMembership),
        HISTORY_GRPC_PORT: String(ports.history),
        HISTORY_MEMBERSHIP_PORT: String(ports.historyMembership),
        MATCHING_GRPC_PORT: String(ports.matching),
        MATCHING_MEMBERSHIP_PORT: String(ports.matchingMembership),
        WORKER_GRPC_PORT: String(ports.worker),
        WORKER_MEMBERSHIP_PORT: String(ports.workerMembership),
        PROMETHEUS_ENDPOINT: `127.0.0.1:${ports.metrics}`,
        DYNAMIC_CONFIG_FILE_PATH: path.join(TEMPORAL_DEPLOY_DIR, 'dynamicconfig', 'production.yaml'),
        LOG_LEVEL: 'info',
      }),
    },
  );
}

async function frontendServing(options: TemporalConnectionOptions): Promise<boolean> {
  try {
    const connection = await Connection.connect({ ...options, connectTimeout: 1_000 });
    try {
      const { status } = await connection.healthService.check({});
      return status === 1; // SERVING
    } finally {
      await connection.close();
    }
  } catch {
    return false;
  }
}

/** Waits until the frontend answers its health check; fails at once if the process exits. */
export function waitForTemporalServer(layout: ClusterLayout, record: ProcessRecord, logFile: string): Promise<void> {
  const options = temporalConnectionOptions(layout.temporal.address, parseConfig(temporalClientEnv(layout)).temporal);
  return waitUntil(
    async () => {
      if (!isRunning(record)) throw new Error(`the Temporal server exited during start-up; see ${logFile}:\n${tail(logFile)}`);
      return frontendServing(options);
    },
    READY_TIMEOUT_MS,
    () => `the Temporal server did not serve on ${layout.temporal.address} within ${READY_TIMEOUT_MS / 1000} s; see ${logFile}:\n${tail(logFile)}`,
  );
}

/** Starts the Web UI against the server. */
export function startUi(layout: ClusterLayout, bins: TemporalBinaries, logFile: string): ProcessRecord {
  return spawnDetached('ui', 0, bins['temporal-ui-server'], ['--root', TEMPORAL_DEPLOY_DIR, '--config', 'ui', '--env', 'production', 'start'], {
    cwd: REPO_ROOT,
    logFile,
    env: baseEnv({
      ...temporalClientEnv(layout),
      TEMPORAL_UI_HOST: '127.0.0.1',
      TEMPORAL_UI_PORT: String(layout.ui.port),
    }),
  });
}
