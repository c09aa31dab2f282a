import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../src/config.ts';
import { temporalConnectionOptions } from '../src/temporal/connection.ts';
import { stopGraceMs } from '../src/local/cluster/topology.ts';
import { MAX_DELIVERY_TIMEOUT_MS, SEND_HEARTBEAT_TIMEOUT_MS, SEND_START_TO_CLOSE_MS, workerDrainMs } from '../workflows/send-limits.ts';

const projectRoot = path.resolve(import.meta.dirname, '..');
const KEY_32_BYTES = Buffer.alloc(32, 7).toString('base64');

function configError(env: NodeJS.ProcessEnv): ConfigError {
  try {
    parseConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`parseConfig accepted ${JSON.stringify(env)}`);
}

describe('parseConfig', () => {
  it('gives the documented defaults for an empty environment', () => {
    const config = parseConfig({});

    expect(config.http).toEqual({ port: 8080, host: '127.0.0.1' });
    expect(config.dataDir).toBe(path.resolve('.data'));
    expect(config.database).toEqual({
      kind: 'pglite',
      dataDir: path.join(path.resolve('.data'), 'pglite'),
      port: 5433,
      poolMax: 10,
      timeouts: { statementMs: 30_000, lockMs: 5_000 },
    });
    expect(config.temporal).toMatchObject({
      address: undefined,
      namespace: 'default',
      taskQueue: 'webhook-deliveries',
      port: 7233,
      uiPort: 8233,
      cliPath: undefined,
      workflowBundlePath: path.resolve('dist/workflow-bundle.js'),
    });
    expect(config.logLevel).toBe('info');
    expect(config.secretEncryptionKey).toBeUndefined();
    expect(config.eventProducerToken).toBeUndefined();
    expect(config.delivery).toEqual({ timeoutMs: 30_000, allowPrivateTargets: false, ca: undefined, traceparent: false });
    expect(config.tracing).toBeUndefined();
    expect(config.retention).toEqual({ periodMs: 30 * 86_400_000, sweepIntervalMs: 3_600_000 });
    expect(config.bulkRetryRate).toBe(5);
    expect(config.admission).toEqual({ publish: { rate: 3, burst: 3 }, maxWebhooks: 1000, maxBulkRetries: 3 });
    expect(config.autoDisable).toEqual({ afterMs: 5 * 86_400_000, minDeadLetters: 10 });
    expect(config.flow).toEqual({
      webhookMaxInFlight: 10,
      projectMaxInFlight: 100,
      destinationMaxInFlight: 200,
      workerMaxInFlight: 1000,
      breakerThreshold: 5,
      probeIntervalMs: 1000,
      recoveryRate: 3,
    });
  });

  it('reads the send-capacity limits, and refuses bad values naming the variable', () => {
    expect(
      parseConfig({
        ENDPOINT_MAX_IN_FLIGHT: '3',
        PROJECT_MAX_IN_FLIGHT: '40',
        DESTINATION_MAX_IN_FLIGHT: '60',
        WORKER_MAX_SENDS_IN_FLIGHT: '500',
        CIRCUIT_BREAKER_THRESHOLD: '8',
        CIRCUIT_BREAKER_PROBE_INTERVAL: '250ms',
        PROJECT_RECOVERY_RATE: '2.5',
      }).flow,
    ).toEqual({ webhookMaxInFlight: 3, projectMaxInFlight: 40, destinationMaxInFlight: 60, workerMaxInFlight: 500, breakerThreshold: 8, probeIntervalMs: 250, recoveryRate: 2.5 });
    expect(parseConfig({ CIRCUIT_BREAKER_PROBE_INTERVAL: '0s' }).flow.probeIntervalMs).toBe(0);
    expect(configError({ CIRCUIT_BREAKER_PROBE_INTERVAL: '2m' }).message).toContain('CIRCUIT_BREAKER_PROBE_INTERVAL: must be a duration of at most 1m');
    expect(parseConfig({ PROJECT_RECOVERY_RATE: '0' }).flow.recoveryRate).toBeNull();
    expect(configError({ PROJECT_RECOVERY_RATE: '0.05' }).message).toContain('PROJECT_RECOVERY_RATE: must be 0 (no pace) or from 0.1 to 1000 deliveries per second');
    expect(configError({ PROJECT_RECOVERY_RATE: 'fast' }).message).toContain('PROJECT_RECOVERY_RATE: must be a number of deliveries per second, such as 5, or 0 for no pace');
    expect(configError({ ENDPOINT_MAX_IN_FLIGHT: '0' }).message).toContain('ENDPOINT_MAX_IN_FLIGHT: must be a whole number from 1 to 1000');
    expect(configError({ PROJECT_MAX_IN_FLIGHT: 'many' }).message).toContain('PROJECT_MAX_IN_FLIGHT: must be a whole number from 1 to 100000');
    expect(configError({ DESTINATION_MAX_IN_FLIGHT: '0' }).message).toContain('DESTINATION_MAX_IN_FLIGHT: must be a whole number from 1 to 100000');
    expect(configError({ WORKER_MAX_SENDS_IN_FLIGHT: '100001' }).message).toContain('WORKER_MAX_SENDS_IN_FLIGHT: must be a whole number from 1 to 100000');
    expect(configError({ CIRCUIT_BREAKER_THRESHOLD: 'often' }).message).toContain('CIRCUIT_BREAKER_THRESHOLD: must be a whole number from 1 to 1000');
  });

  it('reads the database statement and lock timeouts, and refuses bad values naming the variable', () => {
    const config = parseConfig({ DATABASE_URL: 'postgres://db/webhooks', DATABASE_STATEMENT_TIMEOUT: '2m', DATABASE_LOCK_TIMEOUT: '500ms' });
    expect(config.database).toMatchObject({ timeouts: { statementMs: 120_000, lockMs: 500 } });
    expect(configError({ DATABASE_STATEMENT_TIMEOUT: '0s' }).message).toContain('DATABASE_STATEMENT_TIMEOUT: must be a duration of at least 1s');
    expect(configError({ DATABASE_LOCK_TIMEOUT: 'soon' }).message).toContain('DATABASE_LOCK_TIMEOUT: must be a duration');
  });

  it("keeps every allowed DELIVERY_TIMEOUT_MS inside the send activity's timeouts", () => {
    expect(parseConfig({ DELIVERY_TIMEOUT_MS: String(MAX_DELIVERY_TIMEOUT_MS) }).delivery.timeoutMs).toBe(MAX_DELIVERY_TIMEOUT_MS);
    expect(configError({ DELIVERY_TIMEOUT_MS: String(MAX_DELIVERY_TIMEOUT_MS + 1) }).message).toContain('DELIVERY_TIMEOUT_MS');
    // The longest exchange, with time for the attempt's statements, ends before the activity's limit;
    // a hanging request does not stop the heartbeats, which go on every second.
    expect(SEND_START_TO_CLOSE_MS - MAX_DELIVERY_TIMEOUT_MS).toBeGreaterThanOrEqual(30_000);
    expect(SEND_HEARTBEAT_TIMEOUT_MS).toBeGreaterThan(2 * 1_000);
  });

  it('gives a worker of `npm run cluster` longer to stop than its drain, for every allowed DELIVERY_TIMEOUT_MS', () => {
    for (const timeoutMs of [100, 30_000, MAX_DELIVERY_TIMEOUT_MS]) {
      const drainMs = workerDrainMs(parseConfig({ DELIVERY_TIMEOUT_MS: String(timeoutMs) }).delivery.timeoutMs);
      expect(drainMs).toBeGreaterThanOrEqual(timeoutMs + 5_000);
      expect(stopGraceMs('worker', drainMs)).toBeGreaterThan(drainMs);
    }
    // A state written before the drain was recorded: the default DELIVERY_TIMEOUT_MS's.
    expect(stopGraceMs('worker')).toBeGreaterThan(workerDrainMs(30_000));
  });

  it('reads the bulk retry rate and the endpoint-health rule, and refuses bad values naming the variable', () => {
    const config = parseConfig({ BULK_RETRY_RATE: '2.5', WEBHOOK_AUTO_DISABLE_AFTER: '40s', WEBHOOK_AUTO_DISABLE_MIN_DEAD_LETTERS: '3' });
    expect(config.bulkRetryRate).toBe(2.5);
    expect(config.autoDisable).toEqual({ afterMs: 40_000, minDeadLetters: 3 });
    expect(configError({ BULK_RETRY_RATE: 'fast' }).message).toContain('BULK_RETRY_RATE: must be a number of deliveries per second');
    expect(configError({ BULK_RETRY_RATE: '0' }).message).toContain('BULK_RETRY_RATE: must be at least 0.1');
    expect(configError({ WEBHOOK_AUTO_DISABLE_AFTER: '5 days' }).message).toContain('WEBHOOK_AUTO_DISABLE_AFTER: must be a duration');
    expect(configError({ WEBHOOK_AUTO_DISABLE_MIN_DEAD_LETTERS: '0' }).message).toContain('WEBHOOK_AUTO_DISABLE_MIN_DEAD_LETTERS: must be a whole number of at least 1');
  });

  it('reads the retention period and sweep interval as durations, and refuses others naming the variable', () => {
    expect(parseConfig({ RETENTION_PERIOD: '90d', RETENTION_SWEEP_INTERVAL: '15m' }).retention).toEqual({
      periodMs: 90 * 86_400_000,
      sweepIntervalMs: 900_000,
    });
    expect(configError({ RETENTION_PERIOD: '30 days' }).message).toContain(
      'RETENTION_PERIOD: must be a duration of at least 1h, such as 30d, 12h, 15m or 90s',
    );
    expect(configError({ RETENTION_PERIOD: '59m' }).message).toContain('RETENTION_PERIOD: must be a duration of at least 1h');
    expect(configError({ RETENTION_SWEEP_INTERVAL: '10s' }).message).toContain('RETENTION_SWEEP_INTERVAL: must be a duration of at least 1m');
    // "Keep for ever" written as a huge period: refused, not a cutoff before year 1 that fails every sweep.
    expect(configError({ RETENTION_PERIOD: '1000000d' }).message).toContain('RETENTION_PERIOD: must be a duration of at most 3650d');
    expect(parseConfig({ RETENTION_PERIOD: '3650d' }).retention.periodMs).toBe(3650 * 86_400_000);
    expect(configError({ DATABASE_STATEMENT_TIMEOUT: '25d' }).message).toContain('DATABASE_STATEMENT_TIMEOUT: must be a duration of at most 24d');
  });

  it('uses DATABASE_URL and TEMPORAL_ADDRESS when they are set', () => {
    const config = parseConfig({
      DATABASE_URL: 'postgres://user:pw@db.internal:5432/webhooks',
      DATABASE_POOL_MAX: '25',
      TEMPORAL_ADDRESS: 'temporal:7233',
      TEMPORAL_NAMESPACE: 'webhooks',
    });

    expect(config.database).toEqual({
      kind: 'postgres',
      url: 'postgres://user:pw@db.internal:5432/webhooks',
      poolMax: 25,
      timeouts: { statementMs: 30_000, lockMs: 5_000 },
    });
    expect(config.temporal.address).toBe('temporal:7233');
    expect(config.temporal.namespace).toBe('webhooks');
  });

  it('reads every other variable it documents', () => {
    const config = parseConfig({
      PORT: '9090',
      HOST: '0.0.0.0',
      DATA_DIR: '/var/lib/webhooks',
      PGLITE_PORT: '6543',
      TEMPORAL_PORT: '17233',
      TEMPORAL_UI_PORT: '18233',
      TEMPORAL_TASK_QUEUE: 'q',
      LOG_LEVEL: 'silent',
      SECRET_ENCRYPTION_KEY: KEY_32_BYTES,
      EVENT_PRODUCER_TOKEN: 'p'.repeat(32),
      METRICS_HOST: '10.0.0.5',
      DELIVERY_TIMEOUT_MS: '5000',
      DELIVERY_ALLOW_PRIVATE_TARGETS: 'true',
      DELIVERY_TRACEPARENT: 'true',
      WORKER_MAX_CACHED_WORKFLOWS: '0',
    });

    expect(config.http).toEqual({ port: 9090, host: '0.0.0.0' });
    expect(config.database).toMatchObject({ kind: 'pglite', dataDir: '/var/lib/webhooks/pglite', port: 6543 });
    expect(config.temporal).toMatchObject({ port: 17233, uiPort: 18233, taskQueue: 'q' });
    expect(config.logLevel).toBe('silent');
    expect(config.secretEncryptionKey).toBe(KEY_32_BYTES);
    expect(config.eventProducerToken).toBe('p'.repeat(32));
    expect(config.metrics.host).toBe('10.0.0.5');
    expect(config.delivery).toEqual({ timeoutMs: 5000, allowPrivateTargets: true, traceparent: true });
    expect(config.temporal.maxCachedWorkflows).toBe(0);
  });

  it('turns tracing on with an OTLP endpoint, from the standard OTEL_* variables only', () => {
    expect(
      parseConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-tenant = acme',
        OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-resource,deployment.environment.name=prod',
      }).tracing,
    ).toEqual({
      endpoint: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: { authorization: 'Bearer abc', 'x-tenant': 'acme' },
      serviceName: 'from-resource',
      resourceAttributes: { 'deployment.environment.name': 'prod' },
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
    expect(
      parseConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example.com/custom/traces',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'webhooks-eu',
        OTEL_RESOURCE_ATTRIBUTES: 'service.name=overridden',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }).tracing,
    ).toMatchObject({
      endpoint: 'https://collector.example.com/custom/traces',
      protocol: 'http/json',
      serviceName: 'webhooks-eu',
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
    });
    // gRPC has no signal path: the endpoint is the collector's address.
    expect(parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).tracing?.endpoint).toBe('http://collector:4317');
  });

  it('keeps tracing off with OTEL_SDK_DISABLED=true, an endpoint set or not', () => {
    expect(parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' }).tracing).toBeUndefined();
    expect(parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'false' }).tracing).toBeDefined();
    expect(parseConfig({ OTEL_SERVICE_NAME: 'webhooks', OTEL_TRACES_SAMPLER: 'always_on' }).tracing).toBeUndefined();
  });

  it('reads PUBLIC_URL as an origin, and refuses one with a path or another scheme, naming it', () => {
    expect(parseConfig({ PUBLIC_URL: 'https://Webhooks.Example.com/' }).http.publicUrl).toBe('https://webhooks.example.com');
    expect(parseConfig({ PUBLIC_URL: '' }).http.publicUrl).toBeUndefined();
    expect(configError({ PUBLIC_URL: 'https://example.com/portal' }).message).toMatch(/PUBLIC_URL: must be an origin without a path/);
    expect(configError({ PUBLIC_URL: 'ftp://example.com' }).message).toMatch(/PUBLIC_URL: must be an http\(s\) origin/);
  });

  it('accepts a bracketed IPv6 TEMPORAL_ADDRESS', () => {
    expect(parseConfig({ TEMPORAL_ADDRESS: '[::1]:7233' }).temporal.address).toBe('[::1]:7233');
  });

  it('treats empty DATABASE_URL and TEMPORAL_ADDRESS as unset, as an env file with blank lines does', () => {
    const config = parseConfig({ DATABASE_URL: '', TEMPORAL_ADDRESS: ' ' });

    expect(config.database.kind).toBe('pglite');
    expect(config.temporal.address).toBeUndefined();
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '0x50'],
    ['PGLITE_PORT', ''],
    ['WORKER_MAX_CACHED_WORKFLOWS', ''],
    ['DELIVERY_CA_FILE', '/nonexistent/ca.pem'],
    ['DATABASE_URL', 'mysql://x'],
    ['TEMPORAL_ADDRESS', 'nohostport'],
    ['LOG_LEVEL', 'loud'],
    ['SECRET_ENCRYPTION_KEY', 'short'],
    ['DELIVERY_ALLOW_PRIVATE_TARGETS', 'yes'],
    ['DELIVERY_TRACEPARENT', 'maybe'],
    ['OTEL_SDK_DISABLED', 'yes'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318'],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'ftp://collector/v1/traces'],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'http'],
    ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'grpc/json'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'authorization'],
    ['OTEL_RESOURCE_ATTRIBUTES', 'team=%zz'],
    ['OTEL_TRACES_SAMPLER', 'jaeger_remote'],
    ['OTEL_TRACES_SAMPLER_ARG', '1.5'],
  ])('rejects %s=%s with a ConfigError that names the variable', (variable, value) => {
    const error = configError({ [variable]: value });

    expect(error.message).toMatch(new RegExp(`^  ${variable}: `, 'm'));
    expect(error.message.split('\n')).toHaveLength(2);
  });

  it('names every bad variable at once', () => {
    const error = configError({ PORT: 'abc', LOG_LEVEL: 'loud', DATABASE_URL: 'mysql://x', DELIVERY_TIMEOUT_MS: '-1' });

    for (const variable of ['PORT', 'LOG_LEVEL', 'DATABASE_URL', 'DELIVERY_TIMEOUT_MS']) {
      expect(error.message).toMatch(new RegExp(`^  ${variable}: `, 'm'));
    }
  });
});

describe('TLS to TEMPORAL_ADDRESS (TEMPORAL_TLS*, TEMPORAL_API_KEY)', () => {
  const ADDRESS = 'webhooks.a1b2c.tmprl.cloud:7233';
  let dir: string;
  /** Two sets of make-certificates.sh's files, each of its own CA. */
  let files: (set: 'a' | 'b', name: 'ca.pem' | 'client.pem' | 'client.key') => string;

  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'webhooks-temporal-tls-'));
    for (const set of ['a', 'b']) execFileSync('sh', [path.join(projectRoot, 'deploy/temporal/make-certificates.sh'), path.join(dir, set)], { stdio: 'ignore' });
    files = (set, name) => path.join(dir, set, name);
    writeFileSync(path.join(dir, 'garbled.pem'), '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const mutualTls = () => ({
    TEMPORAL_ADDRESS: ADDRESS,
    TEMPORAL_TLS_CLIENT_CERT_PATH: files('a', 'client.pem'),
    TEMPORAL_TLS_CLIENT_KEY_PATH: files('a', 'client.key'),
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: files('a', 'ca.pem'),
  });

  it('reads DELIVERY_CA_FILE at start, and names it when its file is missing or holds no certificate', () => {
    expect(parseConfig({ DELIVERY_CA_FILE: files('a', 'ca.pem') }).delivery.ca).toEqual(readFileSync(files('a', 'ca.pem')));
    expect(configError({ DELIVERY_CA_FILE: files('a', 'client.key') }).message).toMatch(/^  DELIVERY_CA_FILE: .*holds no PEM certificate/m);
    expect(configError({ DELIVERY_CA_FILE: path.join(dir, 'garbled.pem') }).message).toMatch(/^  DELIVERY_CA_FILE: .*does not parse/m);
  });

  it('connects in plaintext unless a variable asks for TLS; an API key asks for it unless TEMPORAL_TLS=false', () => {
    const options = (env: NodeJS.ProcessEnv) => temporalConnectionOptions(ADDRESS, parseConfig({ TEMPORAL_ADDRESS: ADDRESS, ...env }).temporal);

    expect(options({})).toEqual({ address: ADDRESS });
    expect(options({ TEMPORAL_TLS: 'true' })).toEqual({ address: ADDRESS, tls: {} });
    expect(options({ TEMPORAL_API_KEY: 'key-1' })).toEqual({ address: ADDRESS, tls: {}, apiKey: 'key-1' });
    expect(options({ TEMPORAL_API_KEY: 'key-1', TEMPORAL_TLS: 'false' })).toEqual({ address: ADDRESS, apiKey: 'key-1' });
    expect(options({ TEMPORAL_TLS_SERVER_NAME: 'temporal.internal' })).toEqual({ address: ADDRESS, tls: { serverNameOverride: 'temporal.internal' } });
  });

  it('reads the client certificate, its key and the server CA once, for mutual TLS', () => {
    const { temporal } = parseConfig({ ...mutualTls(), TEMPORAL_TLS_SERVER_NAME: 'localhost' });

    expect(temporalConnectionOptions(ADDRESS, temporal)).toEqual({
      address: ADDRESS,
      tls: {
        serverRootCACertificate: readFileSync(files('a', 'ca.pem')),
        serverNameOverride: 'localhost',
        clientCertPair: { crt: readFileSync(files('a', 'client.pem')), key: readFileSync(files('a', 'client.key')) },
      },
    });
  });

  it.each<[string, (env: ReturnType<typeof mutualTls>) => NodeJS.ProcessEnv, string, RegExp]>([
    ['a certificate without its key', (env) => ({ ...env, TEMPORAL_TLS_CLIENT_KEY_PATH: '' }), 'TEMPORAL_TLS_CLIENT_KEY_PATH', /must be set with TEMPORAL_TLS_CLIENT_CERT_PATH/],
    ['a key without its certificate', (env) => ({ ...env, TEMPORAL_TLS_CLIENT_CERT_PATH: undefined }), 'TEMPORAL_TLS_CLIENT_CERT_PATH', /must be set with TEMPORAL_TLS_CLIENT_KEY_PATH/],
    ['a missing certificate file', (env) => ({ ...env, TEMPORAL_TLS_CLIENT_CERT_PATH: '/nonexistent/client.pem' }), 'TEMPORAL_TLS_CLIENT_CERT_PATH', /\/nonexistent\/client\.pem does not exist/],
    ['a folder for a file', (env) => ({ ...env, TEMPORAL_TLS_SERVER_CA_CERT_PATH: os.tmpdir() }), 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', /cannot read .*EISDIR/],
    ['a key where the certificate goes', (env) => ({ ...env, TEMPORAL_TLS_CLIENT_CERT_PATH: env.TEMPORAL_TLS_CLIENT_KEY_PATH }), 'TEMPORAL_TLS_CLIENT_CERT_PATH', /holds no PEM certificate/],
    ['a certificate where the key goes', (env) => ({ ...env, TEMPORAL_TLS_CLIENT_KEY_PATH: env.TEMPORAL_TLS_CLIENT_CERT_PATH }), 'TEMPORAL_TLS_CLIENT_KEY_PATH', /holds no unencrypted PEM private key/],
    ['a CA file that is not PEM', (env) => ({ ...env, TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(projectRoot, 'package.json') }), 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', /holds no PEM certificate/],
    ['a PEM block that is no certificate', (env) => ({ ...env, TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(dir, 'garbled.pem') }), 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', /holds a certificate that does not parse/],
    ['the key of another certificate', (env) => ({ ...env, TEMPORAL_TLS_CLIENT_KEY_PATH: files('b', 'client.key') }), 'TEMPORAL_TLS_CLIENT_KEY_PATH', /does not belong to the certificate in .* \(TEMPORAL_TLS_CLIENT_CERT_PATH\)/],
    ['TLS without TEMPORAL_ADDRESS', (env) => ({ ...env, TEMPORAL_ADDRESS: undefined }), 'TEMPORAL_ADDRESS', /must be set with TEMPORAL_TLS_CLIENT_CERT_PATH, .*: the embedded Temporal dev server speaks plaintext/],
    ['TEMPORAL_TLS=false with certificates', (env) => ({ ...env, TEMPORAL_TLS: 'false' }), 'TEMPORAL_TLS', /is false, yet TEMPORAL_TLS_CLIENT_CERT_PATH, .* ask for TLS/],
    ['TEMPORAL_TLS that is no boolean', (env) => ({ ...env, TEMPORAL_TLS: 'yes' }), 'TEMPORAL_TLS', /./],
  ])('refuses %s at start, naming the variable', (_case, change, variable, message) => {
    const error = configError(change(mutualTls()));

    const line = error.message.split('\n').find((text) => text.startsWith(`  ${variable}: `));
    expect(line, error.message).toMatch(message);
  });
});

describe('the service started with a bad configuration', () => {
  it('exits non-zero and says which variable is wrong', () => {
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: 'abc' };
    delete env.DATABASE_URL;
    const result = spawnSync('npx', ['tsx', 'src/main.ts'], { cwd: projectRoot, env, encoding: 'utf8', timeout: 60_000 });

    expect(result.status).not.toBe(0);
    expect(result.status).not.toBeNull();
    expect(result.stderr).toMatch(/^ {2}PORT: /m);
  }, 120_000);
});
