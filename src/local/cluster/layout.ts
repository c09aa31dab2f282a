/**
 * Where everything of the local production topology lives: folders in DATA_DIR/cluster, and
 * ports derived from the service's own variables (PORT, TEMPORAL_PORT, TEMPORAL_UI_PORT,
 * METRICS_PORT, TEMPORAL_SDK_METRICS_PORT, CLUSTER_POSTGRES_PORT).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../../config.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** The deployment files docker-compose.yml mounts, used here as they are. */
export const DEPLOY_DIR = path.join(REPO_ROOT, 'deploy');

/** Replicas of each service role. */
export interface ReplicaCounts {
  api: number;
  worker: number;
}

/**
 * The Temporal server's ports: a block of ten from TEMPORAL_PORT (7233-7242 by default), so
 * one variable moves them all.
 */
const TEMPORAL_PORT_OFFSETS = {
  frontend: 0,
  history: 1,
  matching: 2,
  worker: 3,
  frontendMembership: 4,
  historyMembership: 5,
  matchingMembership: 6,
  workerMembership: 7,
  frontendHttp: 8,
  metrics: 9,
} as const;

export type TemporalPorts = Record<keyof typeof TEMPORAL_PORT_OFFSETS, number>;

export interface ClusterLayout {
  readonly dataDir: string;
  /** DATA_DIR/cluster: the state file, credentials, logs and the PostgreSQL data. */
  readonly root: string;
  readonly logDir: string;
  readonly stateFile: string;
  readonly credentialsFile: string;
  readonly postgres: { readonly dataDir: string; readonly socketDir: string; readonly port: number };
  readonly temporal: { readonly ports: TemporalPorts; readonly address: string; readonly metricsUrl: string };
  /** CLUSTER_TLS: the certificates of the frontend's mutual TLS, in DATA_DIR/cluster/tls (deploy/temporal/make-certificates.sh). */
  readonly tls?: TlsFiles;
  readonly ui: { readonly port: number; readonly url: string };
  readonly api: readonly { readonly port: number; readonly url: string; readonly metricsPort: number }[];
  readonly workers: readonly { readonly metricsPort: number; readonly sdkMetricsPort: number }[];
}

/** The files make-certificates.sh writes. */
export interface TlsFiles {
  readonly dir: string;
  readonly caCert: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
}

const LOOPBACK = '127.0.0.1';

/** The layout for `counts` replicas under `config`. */
export function clusterLayout(config: Config, counts: ReplicaCounts): ClusterLayout {
  const root = path.join(config.dataDir, 'cluster');
  const temporalPorts = Object.fromEntries(
    Object.entries(TEMPORAL_PORT_OFFSETS).map(([name, offset]) => [name, config.temporal.port + offset]),
  ) as TemporalPorts;
  const apiHost = config.http.host === '0.0.0.0' || config.http.host === '::' ? LOOPBACK : config.http.host;
  return {
    dataDir: config.dataDir,
    root,
    logDir: path.join(root, 'logs'),
    stateFile: path.join(root, 'state.json'),
    credentialsFile: path.join(root, 'credentials.json'),
    postgres: {
      dataDir: path.join(root, 'postgres', 'data'),
      socketDir: path.join(root, 'postgres', 'socket'),
      port: config.cluster.postgresPort,
    },
    temporal: {
      ports: temporalPorts,
      address: `${LOOPBACK}:${temporalPorts.frontend}`,
      metricsUrl: `http://${LOOPBACK}:${temporalPorts.metrics}/metrics`,
    },
    ...(config.cluster.tls && { tls: tlsFiles(path.join(root, 'tls')) }),
    ui: { port: config.temporal.uiPort, url: `http://${LOOPBACK}:${config.temporal.uiPort}` },
    // Two ports per worker from each base: 9464/9465, 9466/9467, ...; API replicas' /metrics follow.
    api: Array.from({ length: counts.api }, (_, i) => ({
      port: config.http.port + i,
      url: `http://${apiHost}:${config.http.port + i}`,
      metricsPort: config.metrics.port + 2 * (counts.worker + i),
    })),
    workers: Array.from({ length: counts.worker }, (_, i) => ({
      metricsPort: config.metrics.port + 2 * i,
      sdkMetricsPort: config.metrics.sdkPort + 2 * i,
    })),
  };
}

function tlsFiles(dir: string): TlsFiles {
  const file = (name: string) => path.join(dir, name);
  return {
    dir,
    caCert: file('ca.pem'),
    serverCert: file('server.pem'),
    serverKey: file('server.key'),
    clientCert: file('client.pem'),
    clientKey: file('client.key'),
  };
}

/** Every port the layout binds, with the variable that moves it (for "port in use" errors). */
export function boundPorts(layout: ClusterLayout): { role: string; port: number; variable: string }[] {
  return [
    { role: 'postgres', port: layout.postgres.port, variable: 'CLUSTER_POSTGRES_PORT' },
    ...Object.values(layout.temporal.ports).map((port) => ({ role: 'temporal', port, variable: 'TEMPORAL_PORT (the server uses TEMPORAL_PORT to TEMPORAL_PORT+9)' })),
    { role: 'ui', port: layout.ui.port, variable: 'TEMPORAL_UI_PORT' },
    ...layout.api.flatMap(({ port, metricsPort }) => [
      { role: 'api', port, variable: 'PORT (API replica i listens on PORT+i)' },
      { role: 'api', port: metricsPort, variable: 'METRICS_PORT (API replica i: METRICS_PORT+2(workers+i))' },
    ]),
    ...layout.workers.flatMap(({ metricsPort, sdkMetricsPort }) => [
      { role: 'worker', port: metricsPort, variable: 'METRICS_PORT (worker i: METRICS_PORT+2i)' },
      { role: 'worker', port: sdkMetricsPort, variable: 'TEMPORAL_SDK_METRICS_PORT (worker i: TEMPORAL_SDK_METRICS_PORT+2i)' },
    ]),
  ];
}
