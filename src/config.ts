import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { formatDuration, parseDuration } from './duration.ts';
import { DEFAULT_DELIVERY_TIMEOUT_MS, MAX_DELIVERY_TIMEOUT_MS } from '../workflows/send-limits.ts';

const booleanFromString = z
  .enum(['true', 'false', '1', '0'])
  .transform((value) => value === 'true' || value === '1');

const port = z
  .string()
  .trim()
  .regex(/^\d+$/, 'must be a port number from 1 to 65535')
  .transform(Number)
  .pipe(z.number().min(1, 'must be a port number from 1 to 65535').max(65535, 'must be a port number from 1 to 65535'));

/** Ten years: longer than any period or interval means, and within what dates and timers can add. */
const LONGEST_DURATION_MS = 3650 * 86_400_000;
/** The longest statement or lock timeout PostgreSQL takes (its largest int, in ms): 24 days and a bit. */
const LONGEST_DATABASE_TIMEOUT_MS = 24 * 86_400_000;

/** The shortest retention period, RETENTION_PERIOD's or `retention run --older-than`'s: no delivery is deleted while its producer may still repeat its event. */
export const SHORTEST_RETENTION_PERIOD_MS = 3_600_000;

/**
 * BULK_RETRY_RATE when unset: sized from a bulk retry beside a healthy project on a 2-core machine,
 * whose latency it kept near twice its figure alone (docs/performance.md, "The timer horizon").
 */
export const DEFAULT_BULK_RETRY_RATE = 5;

/**
 * PROJECT_RECOVERY_RATE when unset: below a bulk retry's pace, because a send of a backlog costs
 * more than one a bulk retry signals (it is woken, asks, waits for its start and asks again).
 */
const DEFAULT_PROJECT_RECOVERY_RATE = 3;

/** A duration such as `30d`, `12h`, `15m` or `90s`, from `min` to `max`. */
const duration = (min: number, max = LONGEST_DURATION_MS) =>
  z
    .string()
    .transform((value, context) => {
      const ms = parseDuration(value);
      if (ms === undefined || ms < min) {
        context.addIssue({ code: 'custom', message: `must be a duration of at least ${formatDuration(min)}, such as 30d, 12h, 15m or 90s` });
        return z.NEVER;
      }
      if (ms > max) {
        context.addIssue({ code: 'custom', message: `must be a duration of at most ${formatDuration(max)}` });
        return z.NEVER;
      }
      return ms;
    });

/** A whole number from `min` to `max`. */
const wholeNumber = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, `must be a whole number from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().min(min, `must be a whole number from ${min} to ${max}`).max(max, `must be a whole number from ${min} to ${max}`));

/** A number written in decimal (`10`, `2.5`): a rate; `message` says what when it is not one. */
const decimal = (message: string) => z.string().regex(/^\d+(\.\d+)?$/, message).transform(Number);

const optionalString = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value));

/** The OTLP protocols of the OpenTelemetry exporter specification this service speaks. */
const OTLP_PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;
type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** The samplers of OTEL_TRACES_SAMPLER this service offers (the specification's built-in ones). */
const TRACE_SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

const otlpEndpoint = optionalString.pipe(z.url({ protocol: /^https?$/, message: 'must be an http(s) URL, such as http://collector:4318' }).optional());
const otlpProtocol = optionalString.pipe(z.enum(OTLP_PROTOCOLS, { message: `must be one of ${OTLP_PROTOCOLS.join(', ')}` }).optional());

/**
 * A list of `key=value` pairs separated by commas, values percent-encoded (the format of
 * OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES).
 */
const keyValueList = optionalString.transform((value, context) => {
  const pairs: Record<string, string> = {};
  if (value === undefined) return pairs;
  for (const entry of value.split(',').filter((item) => item.trim() !== '')) {
    const separator = entry.indexOf('=');
    const key = separator > 0 ? entry.slice(0, separator).trim() : '';
    let decoded: string | undefined;
    try {
      decoded = separator > 0 ? decodeURIComponent(entry.slice(separator + 1).trim()) : undefined;
    } catch {
      decoded = undefined;
    }
    if (!key || decoded === undefined) {
      context.addIssue({ code: 'custom', message: 'must be key=value pairs separated by commas, values percent-encoded' });
      return z.NEVER;
    }
    pairs[key] = decoded;
  }
  return pairs;
});

const environmentVariables = z.object({
  PORT: port.default(8080),
  HOST: z.string().min(1).default('127.0.0.1'),
  PUBLIC_URL: optionalString.pipe(
    z
      .url({ protocol: /^https?$/, message: 'must be an http(s) origin, such as https://webhooks.example.com' })
      .refine((value) => new URL(value).pathname === '/' && !new URL(value).search, 'must be an origin without a path, such as https://webhooks.example.com')
      .transform((value) => new URL(value).origin)
      .optional(),
  ),
  DATA_DIR: z.string().min(1).default('.data'),
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
      .optional(),
  ),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  DATABASE_STATEMENT_TIMEOUT: duration(1_000, LONGEST_DATABASE_TIMEOUT_MS).prefault('30s'),
  DATABASE_LOCK_TIMEOUT: duration(100, LONGEST_DATABASE_TIMEOUT_MS).prefault('5s'),
  PGLITE_PORT: port.default(5433),
  TEMPORAL_ADDRESS: optionalString.pipe(
    z
      .string()
      .regex(/^(\[[0-9A-Fa-f:.]+\]|[^\s:/[\]]+):\d{1,5}$/, 'must be host:port, for example temporal:7233')
      .optional(),
  ),
  TEMPORAL_TLS: booleanFromString.optional(),
  TEMPORAL_TLS_CLIENT_CERT_PATH: optionalString,
  TEMPORAL_TLS_CLIENT_KEY_PATH: optionalString,
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: optionalString,
  TEMPORAL_TLS_SERVER_NAME: optionalString,
  TEMPORAL_API_KEY: optionalString,
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('webhook-deliveries'),
  WORKER_MAX_CACHED_WORKFLOWS: wholeNumber(0, 100_000).prefault('1000'),
  TEMPORAL_PORT: port.default(7233),
  TEMPORAL_UI_PORT: port.default(8233),
  CLUSTER_POSTGRES_PORT: port.default(5434),
  CLUSTER_TLS: booleanFromString.default(false),
  TEMPORAL_CLI_PATH: optionalString,
  METRICS_PORT: port.default(9464),
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  TEMPORAL_SDK_METRICS_PORT: port.default(9465),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SECRET_ENCRYPTION_KEY: optionalString.pipe(
    z
      .string()
      .refine(
        (value) => Buffer.from(value, 'base64').length === 32,
        'must be 32 bytes encoded in base64 (openssl rand -base64 32)',
      )
      .optional(),
  ),
  SECRET_ENCRYPTION_PREVIOUS_KEYS: optionalString.pipe(
    z
      .string()
      .refine(
        (value) => value.split(',').every((key) => Buffer.from(key.trim(), 'base64').length === 32),
        'must be a comma-separated list of base64 keys of 32 bytes',
      )
      .optional(),
  ),
  EVENT_PRODUCER_TOKEN: optionalString.pipe(
    z.string().min(32, 'must be at least 32 characters').optional(),
  ),
  DELIVERY_TIMEOUT_MS: z.coerce.number().int().min(100).max(MAX_DELIVERY_TIMEOUT_MS).default(DEFAULT_DELIVERY_TIMEOUT_MS),
  ENDPOINT_MAX_IN_FLIGHT: wholeNumber(1, 1000).prefault('10'),
  PROJECT_MAX_IN_FLIGHT: wholeNumber(1, 100_000).prefault('100'),
  DESTINATION_MAX_IN_FLIGHT: wholeNumber(1, 100_000).prefault('200'),
  WORKER_MAX_SENDS_IN_FLIGHT: wholeNumber(1, 100_000).prefault('1000'),
  PROJECT_PUBLISH_RATE: decimal('must be a number of events per second, such as 100')
    .pipe(z.number().min(0.01, 'must be at least 0.01 events per second').max(100_000, 'must be at most 100000 events per second'))
    .prefault('3'),
  PROJECT_PUBLISH_BURST: wholeNumber(1, 1_000_000).prefault('3'),
  PROJECT_MAX_WEBHOOKS: wholeNumber(1, 1_000_000).prefault('1000'),
  BULK_RETRY_MAX_PER_PROJECT: wholeNumber(1, 1000).prefault('3'),
  CIRCUIT_BREAKER_THRESHOLD: wholeNumber(1, 1000).prefault('5'),
  CIRCUIT_BREAKER_PROBE_INTERVAL: duration(0, 60_000).prefault('1s'),
  DELIVERY_ALLOW_PRIVATE_TARGETS: booleanFromString.default(false),
  DELIVERY_CA_FILE: optionalString,
  WEBHOOKS_API_URL: optionalString.pipe(z.url({ message: 'must be an http(s) URL' }).optional()),
  WEBHOOKS_API_TOKEN: optionalString,
  WORKFLOW_BUNDLE_PATH: z.string().min(1).default('dist/workflow-bundle.js'),
  RETENTION_PERIOD: duration(SHORTEST_RETENTION_PERIOD_MS).prefault('30d'),
  WEBHOOK_AUTO_DISABLE_AFTER: duration(1_000).prefault('5d'),
  WEBHOOK_AUTO_DISABLE_MIN_DEAD_LETTERS: z
    .string()
    .regex(/^\d+$/, 'must be a whole number of at least 1')
    .transform(Number)
    .pipe(z.number().min(1, 'must be a whole number of at least 1'))
    .prefault('10'),
  BULK_RETRY_RATE: decimal('must be a number of deliveries per second, such as 10')
    .pipe(z.number().min(0.1, 'must be at least 0.1 deliveries per second').max(1000, 'must be at most 1000 deliveries per second'))
    .prefault(String(DEFAULT_BULK_RETRY_RATE)),
  PROJECT_RECOVERY_RATE: decimal('must be a number of deliveries per second, such as 5, or 0 for no pace')
    .pipe(z.number().refine((rate) => rate === 0 || (rate >= 0.1 && rate <= 1000), 'must be 0 (no pace) or from 0.1 to 1000 deliveries per second'))
    .prefault(String(DEFAULT_PROJECT_RECOVERY_RATE)),
  RETENTION_SWEEP_INTERVAL: duration(60_000).prefault('1h'),
  REPAIR_INTERVAL: duration(5_000).prefault('30s'),
  REPAIR_AFTER: duration(10_000).prefault('2m'),
  DELIVERY_TRACEPARENT: booleanFromString.default(false),
  OTEL_SDK_DISABLED: z
    .string()
    .transform((value) => value.trim().toLowerCase())
    .pipe(z.enum(['true', 'false', ''], { message: 'must be true or false' }))
    .transform((value) => value === 'true')
    .default(false),
  OTEL_EXPORTER_OTLP_ENDPOINT: otlpEndpoint,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlpEndpoint,
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol,
  OTEL_EXPORTER_OTLP_HEADERS: keyValueList,
  OTEL_SERVICE_NAME: optionalString,
  OTEL_RESOURCE_ATTRIBUTES: keyValueList,
  OTEL_TRACES_SAMPLER: optionalString.pipe(z.enum(TRACE_SAMPLERS, { message: `must be one of ${TRACE_SAMPLERS.join(', ')}` }).optional()),
  OTEL_TRACES_SAMPLER_ARG: optionalString.pipe(
    z
      .string()
      .regex(/^\s*(0(\.\d+)?|1(\.0+)?|\.\d+)\s*$/, 'must be a sampling ratio from 0 to 1, such as 0.25')
      .transform(Number)
      .optional(),
  ),
});

const environmentSchema = environmentVariables.transform((env, context) => {
  // Read once, here, so that a missing or wrong file stops every role's start naming its variable.
  const deliveryCa = env.DELIVERY_CA_FILE
    ? readCertificates('DELIVERY_CA_FILE', env.DELIVERY_CA_FILE, (variable, message) => context.addIssue({ code: 'custom', path: [variable], message }))?.pem
    : undefined;
  return { ...env, deliveryCa, temporalTls: temporalTls(env, context) };
});

/** How the service reaches TEMPORAL_ADDRESS over TLS: the files' contents, read and checked once at start. */
export interface TemporalTls {
  /** PEM of the CA(s) that signed the server's certificate; undefined: the system's CAs. */
  serverCaCertificate?: Buffer;
  /** The name the server's certificate must carry, when it is not the host of TEMPORAL_ADDRESS. */
  serverName?: string;
  /** PEM of this service's client certificate and private key, for mutual TLS. */
  client?: { certificate: Buffer; key: Buffer };
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/**
 * TEMPORAL_TLS* and TEMPORAL_API_KEY as Temporal's own environment configuration reads them: any
 * of them turns TLS on (TEMPORAL_TLS=false keeps an API key on plaintext). The files are read
 * here, so that a missing, unreadable or mismatched one stops start-up naming its variable.
 */
function temporalTls(env: z.infer<typeof environmentVariables>, context: z.RefinementCtx): TemporalTls | undefined {
  const problem: Problem = (variable, message) => context.addIssue({ code: 'custom', path: [variable], message });
  const configured = (
    ['TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH', 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'TEMPORAL_TLS_SERVER_NAME', 'TEMPORAL_API_KEY'] as const
  ).filter((name) => env[name]);
  if (!env.TEMPORAL_ADDRESS && (env.TEMPORAL_TLS || configured.length > 0)) {
    problem('TEMPORAL_ADDRESS', `must be set with ${env.TEMPORAL_TLS ? 'TEMPORAL_TLS' : configured.join(', ')}: the embedded Temporal dev server speaks plaintext`);
    return undefined;
  }
  const tlsSettings = configured.filter((name) => name !== 'TEMPORAL_API_KEY');
  if (env.TEMPORAL_TLS === false) {
    if (tlsSettings.length > 0) problem('TEMPORAL_TLS', `is false, yet ${tlsSettings.join(', ')} ask for TLS: unset one or the other`);
    return undefined;
  }
  if (!env.TEMPORAL_TLS && configured.length === 0) return undefined;

  const tls: TemporalTls = {};
  if (env.TEMPORAL_TLS_SERVER_CA_CERT_PATH) {
    tls.serverCaCertificate = readCertificates('TEMPORAL_TLS_SERVER_CA_CERT_PATH', env.TEMPORAL_TLS_SERVER_CA_CERT_PATH, problem)?.pem;
  }
  if (env.TEMPORAL_TLS_SERVER_NAME) tls.serverName = env.TEMPORAL_TLS_SERVER_NAME;
  const certPath = env.TEMPORAL_TLS_CLIENT_CERT_PATH;
  const keyPath = env.TEMPORAL_TLS_CLIENT_KEY_PATH;
  if (certPath && !keyPath) problem('TEMPORAL_TLS_CLIENT_KEY_PATH', 'must be set with TEMPORAL_TLS_CLIENT_CERT_PATH: the private key of the client certificate');
  if (keyPath && !certPath) problem('TEMPORAL_TLS_CLIENT_CERT_PATH', 'must be set with TEMPORAL_TLS_CLIENT_KEY_PATH: the client certificate of that private key');
  if (certPath && keyPath) {
    const certificate = readCertificates('TEMPORAL_TLS_CLIENT_CERT_PATH', certPath, problem);
    const key = readPrivateKey('TEMPORAL_TLS_CLIENT_KEY_PATH', keyPath, problem);
    if (certificate && key) {
      // The first certificate of the file is the client's own; any others are intermediates.
      if (certificate.certificates[0]!.checkPrivateKey(key.object)) tls.client = { certificate: certificate.pem, key: key.pem };
      else problem('TEMPORAL_TLS_CLIENT_KEY_PATH', `the key in ${keyPath} does not belong to the certificate in ${certPath} (TEMPORAL_TLS_CLIENT_CERT_PATH)`);
    }
  }
  return tls;
}

type Problem = (variable: string, message: string) => void;

function readFile(variable: string, file: string, problem: Problem): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    problem(variable, code === 'ENOENT' ? `${file} does not exist` : `cannot read ${file}: ${message}`);
    return undefined;
  }
}

/** The PEM certificates of a file (a certificate, then any intermediates; or a CA bundle). */
function readCertificates(variable: string, file: string, problem: Problem): { pem: Buffer; certificates: X509Certificate[] } | undefined {
  const pem = readFile(variable, file, problem);
  if (!pem) return undefined;
  const blocks = pem.toString('latin1').match(PEM_CERTIFICATE);
  if (!blocks) {
    problem(variable, `${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
    return undefined;
  }
  try {
    return { pem, certificates: blocks.map((block) => new X509Certificate(block)) };
  } catch (error) {
    problem(variable, `${file} holds a certificate that does not parse: ${(error as Error).message}`);
    return undefined;
  }
}

function readPrivateKey(variable: string, file: string, problem: Problem): { pem: Buffer; object: KeyObject } | undefined {
  const pem = readFile(variable, file, problem);
  if (!pem) return undefined;
  try {
    return { pem, object: createPrivateKey(pem) };
  } catch (error) {
    problem(variable, `${file} holds no unencrypted PEM private key (${(error as Error).message})`);
    return undefined;
  }
}

/**
 * Tracing (src/tracing/) from the standard OTEL_* variables: on when an OTLP endpoint is set and
 * OTEL_SDK_DISABLED is not true; undefined (off: no SDK loaded) otherwise.
 */
function tracingConfig(env: z.infer<typeof environmentVariables>) {
  const base = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (env.OTEL_SDK_DISABLED || base === undefined) return undefined;
  const protocol: OtlpProtocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
  // The traces endpoint is used as given; the general one gets the signal's path over HTTP (gRPC has none).
  const endpoint =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (protocol === 'grpc' ? base : `${base.replace(/\/+$/, '')}/v1/traces`);
  const { 'service.name': resourceServiceName, ...resourceAttributes } = env.OTEL_RESOURCE_ATTRIBUTES;
  const sampler: TraceSampler = env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on';
  return {
    /** Where spans go: the full URL of the traces endpoint over HTTP, the collector's address over gRPC. */
    endpoint,
    protocol,
    /** Headers of every export request (an authorization token, say): never logged. */
    headers: env.OTEL_EXPORTER_OTLP_HEADERS,
    /** OTEL_SERVICE_NAME, else `service.name` of OTEL_RESOURCE_ATTRIBUTES; unset, each role names itself. */
    serviceName: env.OTEL_SERVICE_NAME ?? resourceServiceName,
    resourceAttributes,
    sampler,
    /** The ratio of the `traceidratio` samplers (OTEL_TRACES_SAMPLER_ARG, 1 when unset). */
    samplerRatio: env.OTEL_TRACES_SAMPLER_ARG ?? 1,
  };
}

/** How long one statement may run, and wait for a lock, on the service's connections (not the migrations'). */
function databaseTimeouts(env: z.infer<typeof environmentVariables>) {
  return { statementMs: env.DATABASE_STATEMENT_TIMEOUT, lockMs: env.DATABASE_LOCK_TIMEOUT };
}

/** Tracing settings (the standard OTEL_* variables). */
export type TracingConfig = NonNullable<ReturnType<typeof tracingConfig>>;

/** The service configuration, parsed once from the environment. */
export type Config = ReturnType<typeof toConfig>;

function toConfig(env: z.infer<typeof environmentSchema>) {
  const dataDir = path.resolve(env.DATA_DIR);
  return {
    http: {
      port: env.PORT,
      host: env.HOST,
      /** The origin customers reach the service at, for portal links; unset: the origin of each request (the CLI: its API URL). */
      publicUrl: env.PUBLIC_URL,
    },
    dataDir,
    database: env.DATABASE_URL
      ? ({ kind: 'postgres', url: env.DATABASE_URL, poolMax: env.DATABASE_POOL_MAX, timeouts: databaseTimeouts(env) } as const)
      : ({
          kind: 'pglite',
          dataDir: path.join(dataDir, 'pglite'),
          port: env.PGLITE_PORT,
          poolMax: env.DATABASE_POOL_MAX,
          timeouts: databaseTimeouts(env),
        } as const),
    temporal: {
      /** `undefined` means: spawn the embedded dev server. */
      address: env.TEMPORAL_ADDRESS,
      namespace: env.TEMPORAL_NAMESPACE,
      taskQueue: env.TEMPORAL_TASK_QUEUE,
      /** gRPC port of the embedded dev server. */
      port: env.TEMPORAL_PORT,
      uiPort: env.TEMPORAL_UI_PORT,
      cliPath: env.TEMPORAL_CLI_PATH,
      workflowBundlePath: path.resolve(env.WORKFLOW_BUNDLE_PATH),
      /** Workflows a worker keeps in memory between their tasks; the rest are replayed when they wake. */
      maxCachedWorkflows: env.WORKER_MAX_CACHED_WORKFLOWS,
      /** TLS to TEMPORAL_ADDRESS (TEMPORAL_TLS*); undefined: plaintext. */
      tls: env.temporalTls,
      /** Temporal Cloud API key (TEMPORAL_API_KEY), the Bearer credential of every call. */
      apiKey: env.TEMPORAL_API_KEY,
    },
    cluster: {
      /** Port of the PostgreSQL server of `npm run cluster` (the production topology on one machine). */
      postgresPort: env.CLUSTER_POSTGRES_PORT,
      /** The cluster's Temporal frontend requires mutual TLS, with certificates made in DATA_DIR/cluster/tls. */
      tls: env.CLUSTER_TLS,
    },
    metrics: {
      /** Port of this process's /metrics server, apart from the API's port. */
      port: env.METRICS_PORT,
      /** Interface the /metrics server binds: loopback unless a scraper elsewhere must reach it. */
      host: env.METRICS_HOST,
      /** Loopback port of the Temporal SDK's Prometheus exporter, merged into /metrics. */
      sdkPort: env.TEMPORAL_SDK_METRICS_PORT,
    },
    cli: {
      /** Base URL of the service the CLI talks to. */
      apiUrl: env.WEBHOOKS_API_URL ?? `http://127.0.0.1:${env.PORT}`,
      /** API token the CLI authenticates with (`--token` overrides it). */
      apiToken: env.WEBHOOKS_API_TOKEN,
    },
    retention: {
      /** How long delivered and dead-lettered deliveries, their attempts and their events are kept. */
      periodMs: env.RETENTION_PERIOD,
      /** How often the Temporal Schedule runs the retention sweep. */
      sweepIntervalMs: env.RETENTION_SWEEP_INTERVAL,
    },
    repair: {
      /** How often the Temporal Schedule runs the repair check (undispatched events, deliveries their workflow would not move). */
      intervalMs: env.REPAIR_INTERVAL,
      /** How long a delivery must have stayed `pending` or `processing`, with nothing to explain it, before the check looks at it. */
      staleAfterMs: env.REPAIR_AFTER,
    },
    /** Endpoint health: a webhook failing this long, with this many dead letters, is disabled. */
    autoDisable: { afterMs: env.WEBHOOK_AUTO_DISABLE_AFTER, minDeadLetters: env.WEBHOOK_AUTO_DISABLE_MIN_DEAD_LETTERS },
    /** Deliveries per second a project's bulk retry operations signal at most, together. */
    bulkRetryRate: env.BULK_RETRY_RATE,
    /** What one project may put into the service, unless the operator set its own limits (`npm run cli -- limits`). */
    admission: {
      /** The publish quota: events per second, and at once above it (test events included). */
      publish: { rate: env.PROJECT_PUBLISH_RATE, burst: env.PROJECT_PUBLISH_BURST },
      /** Webhooks a project may have. */
      maxWebhooks: env.PROJECT_MAX_WEBHOOKS,
      /** Bulk retry operations a project may have running at once (and one per webhook). */
      maxBulkRetries: env.BULK_RETRY_MAX_PER_PROJECT,
    },
    logLevel: env.LOG_LEVEL,
    secretEncryptionKey: env.SECRET_ENCRYPTION_KEY,
    /** Keys that sealed secrets before a key rotation; still accepted for opening them. */
    previousSecretEncryptionKeys: env.SECRET_ENCRYPTION_PREVIOUS_KEYS?.split(',').map((key) => key.trim()) ?? [],
    /**
     * The operator's producer token, which publishes for every project; unset (the default),
     * producers use keys of their own project only (`keys create --services events`).
     */
    eventProducerToken: env.EVENT_PRODUCER_TOKEN,
    delivery: {
      timeoutMs: env.DELIVERY_TIMEOUT_MS,
      allowPrivateTargets: env.DELIVERY_ALLOW_PRIVATE_TARGETS,
      /** PEM of the CAs trusted for customers' endpoints besides the system's (DELIVERY_CA_FILE, read at start). */
      ca: env.deliveryCa,
      /** Send a W3C `traceparent` header to customer endpoints (DELIVERY_TRACEPARENT; needs tracing on). */
      traceparent: env.DELIVERY_TRACEPARENT,
    },
    /** Send capacity (src/flow-control/): what one webhook, project and destination may have in flight, across every worker replica. */
    flow: {
      /** Sends in flight to one webhook's endpoint at most. */
      webhookMaxInFlight: env.ENDPOINT_MAX_IN_FLIGHT,
      /** Sends in flight of one project's webhooks at most, unless the operator set the project's own. */
      projectMaxInFlight: env.PROJECT_MAX_IN_FLIGHT,
      /** Sends in flight to one destination (host:port) at most, unless the operator set the destination's own. */
      destinationMaxInFlight: env.DESTINATION_MAX_IN_FLIGHT,
      /** Failed attempts in a row that open a webhook's circuit breaker. */
      breakerThreshold: env.CIRCUIT_BREAKER_THRESHOLD,
      /** Time between the starts of an open breaker's probes, at least (0: one after another). */
      probeIntervalMs: env.CIRCUIT_BREAKER_PROBE_INTERVAL,
      /** Sends one worker process has in flight at most (their HTTP exchanges hold no worker slot). */
      workerMaxInFlight: env.WORKER_MAX_SENDS_IN_FLIGHT,
      /** Sends per second of a project's endpoints' backlogs after their circuit breakers close, together; null: not paced. */
      recoveryRate: env.PROJECT_RECOVERY_RATE === 0 ? null : env.PROJECT_RECOVERY_RATE,
    },
    /** OpenTelemetry tracing; undefined when off (no OTLP endpoint, or OTEL_SDK_DISABLED=true). */
    tracing: tracingConfig(env),
  };
}

/** Thrown when an environment variable has a value the service cannot use. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Parses a set of environment variables into a {@link Config}.
 * Throws a {@link ConfigError} whose message names every bad variable.
 */
export function parseConfig(env: NodeJS.ProcessEnv): Config {
  const result = environmentSchema.safeParse(env);
  if (!result.success) {
    const problems = result.error.issues.map(
      (issue) => `${issue.path.join('.')}: ${issue.message}`,
    );
    throw new ConfigError(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  return toConfig(result.data);
}

let loaded: Config | undefined;

/** The configuration of this process, read from `process.env` on first use. */
export function loadConfig(): Config {
  loaded ??= parseConfig(process.env);
  return loaded;
}
