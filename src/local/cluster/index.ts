/**
 * `npm run cluster -- <command>`: the production topology on one machine, without Docker.
 * See `--help` and docs/deployment.md ("The production topology on one machine, without Docker").
 */
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../../config.ts';
import { DEFAULT_HISTORY_SHARDS, DEFAULT_REPLICAS, down, status, up, type ClusterStatus } from './topology.ts';

const HELP = `npm run cluster -- <command> [options]

Commands:
  up       start what is not running: PostgreSQL (Debian's, data in DATA_DIR/cluster), the Temporal
           server on it, the Web UI, ${DEFAULT_REPLICAS.api} API replicas (PORT, PORT+1) and ${DEFAULT_REPLICAS.worker} worker replicas;
           returns when all answer and prints the addresses. A second up keeps the data.
  status   what runs, and where
  down     stop everything; fails if a process or a bound port is left

Options:
  --json                 print the status as JSON (up, status)
  --apis <n>             API replicas [${DEFAULT_REPLICAS.api}]
  --workers <n>          worker replicas [${DEFAULT_REPLICAS.worker}]
  --history-shards <n>   history shards of a new cluster (fixed for its life) [${DEFAULT_HISTORY_SHARDS}]

Ports and folders come from the service's variables (docs/configuration.md): DATA_DIR, PORT,
TEMPORAL_PORT (the server uses TEMPORAL_PORT..TEMPORAL_PORT+9), TEMPORAL_UI_PORT, METRICS_PORT,
TEMPORAL_SDK_METRICS_PORT, CLUSTER_POSTGRES_PORT. The other variables set when up runs reach
every replica; SECRET_ENCRYPTION_KEY is generated once in DATA_DIR when unset. API replica i
serves /metrics on METRICS_PORT+2(workers+i), worker i on METRICS_PORT+2i, on METRICS_HOST.
CLUSTER_TLS=true: the Temporal frontend requires mutual TLS, with a CA, server and client
certificate made once in DATA_DIR/cluster/tls; every replica, the Web UI and the bootstrap
present the client certificate (status prints the variables a client sets).`;

function fail(message: string, code = 1): never {
  console.error(message);
  process.exit(code);
}

const { values: options, positionals } = (() => {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        apis: { type: 'string' },
        workers: { type: 'string' },
        'history-shards': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (error) {
    return fail(`${(error as Error).message}\n\n${HELP}`, 2);
  }
})();

function count(name: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > max) fail(`--${name} must be a whole number from 1 to ${max}, got ${value}`, 2);
  return n;
}

function print(result: ClusterStatus, json: boolean): void {
  if (json) {
    console.log(JSON.stringify(result, null, 2));
    return;
  }
  const pids = (role: string) => result.processes.filter((p) => p.role === role).map((p) => p.pid).join(' ') || '-';
  console.log(
    [
      `Production topology in ${result.dataDir}:`,
      `  API:          ${result.api.map((url) => `${url}/api-gateway/v2`).join('  ')}`,
      `  Temporal:     ${result.temporal}  (Web UI: ${result.ui}, ${result.historyShards} history shards)`,
      ...(result.temporalEnv.TEMPORAL_TLS_CLIENT_CERT_PATH
        ? [`  Temporal TLS: mutual; clients set ${Object.entries(result.temporalEnv).map(([name, value]) => `${name}=${value}`).join(' ')}`]
        : []),
      `  PostgreSQL:   ${result.postgres}`,
      `  Processes:    postgres ${pids('postgres')}, temporal ${pids('temporal')}, ui ${pids('ui')}, api ${pids('api')}, worker ${pids('worker')}`,
      ...(result.stopped.length > 0 ? [`  Not running:  ${result.stopped.map(({ role, index }) => `${role} ${index}`).join(', ')}`] : []),
      `  Logs:         ${result.dataDir}/cluster/logs`,
      '',
      'Admin CLI against it:  DATABASE_URL=<the PostgreSQL URL above> npm run cli -- keys create --project my-project --services webhooks',
      'Stop it:               npm run cluster -- down',
    ].join('\n'),
  );
}

const command = positionals[0];
if (options.help || !command) {
  console.log(HELP);
  process.exit(options.help ? 0 : 2);
}

let config;
try {
  config = loadConfig();
} catch (error) {
  fail(error instanceof ConfigError ? error.message : String(error));
}
const log = (line: string) => console.error(line);

try {
  switch (command) {
    case 'up': {
      const result = await up(
        config,
        {
          counts: {
            api: count('apis', options.apis, DEFAULT_REPLICAS.api, 16),
            worker: count('workers', options.workers, DEFAULT_REPLICAS.worker, 16),
          },
          historyShards: options['history-shards'] === undefined ? undefined : count('history-shards', options['history-shards'], DEFAULT_HISTORY_SHARDS, 16_384),
          env: process.env,
        },
        log,
      );
      print(result, options.json);
      break;
    }
    case 'status': {
      const result = status(config);
      if (!result) fail(`no cluster has been started in ${config.dataDir} (npm run cluster -- up)`);
      print(result, options.json);
      // 3: some part of the topology is not running.
      process.exit(result.stopped.length > 0 ? 3 : 0);
      break;
    }
    case 'down':
      await down(config, log);
      log('stopped: no process left, no port bound');
      break;
    default:
      fail(`unknown command "${command}"\n\n${HELP}`, 2);
  }
} catch (error) {
  fail(`cluster ${command} failed: ${error instanceof Error ? error.message : String(error)}`);
}
