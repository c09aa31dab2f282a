import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { ensureHelmTools, KUBERNETES_VERSION } from '../../scripts/helm-tools.mjs';
import { healthRouter } from '../../src/api/routes/health.ts';
import { parseConfig } from '../../src/config.ts';
import { createMetrics, serveMetrics } from '../../src/metrics.ts';
import { serviceNodeFlags } from '../support/service-command.ts';

/*
 * The Helm chart, offline: the real helm lints it and renders it with each values set, the real
 * kubernetes-validate checks every rendered object against the Kubernetes API schemas (strict:
 * an unknown field fails), and the objects are checked against the service they run: the
 * variables src/config.ts reads, the routes the probes call, the hooks that order migrations
 * before the new pods, where the secrets go.
 */

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const chartDir = path.join(projectRoot, 'deploy', 'helm', 'webhooks');
const RELEASE = 'webhooks';
/** The one kind the validator has no schema for (a CRD of the Prometheus Operator): checked below instead. */
const SERVICE_MONITOR = { apiVersion: 'monitoring.coreos.com/v1', kind: 'ServiceMonitor' };
const SERVICE_ROLES = ['api', 'worker', 'migrate'] as const;

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
}
interface Probe {
  httpGet: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  env?: EnvVar[];
  ports?: { name: string; containerPort: number }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
}
interface Volume {
  name: string;
  emptyDir?: object;
  secret?: { secretName: string; defaultMode?: number; items?: { key: string; path: string }[] };
  configMap?: { name: string };
}
interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: Volume[];
  securityContext?: { runAsNonRoot?: boolean };
  automountServiceAccountToken?: boolean;
  terminationGracePeriodSeconds?: number;
}
interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: PodSpec;
}
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // Each kind has its own spec; the accessors below narrow it.
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

/** A rendered values set: helm's output as text and as objects. */
interface Rendering {
  text: string;
  manifests: Manifest[];
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'helm-chart-test-'));
// Values a user keeps out of version control, for the chart's own Secret.
const secretValues = {
  databaseUrl: `postgres://webhooks:${randomBytes(12).toString('hex')}@db.example.internal:5432/webhooks`,
  encryptionKey: randomBytes(32).toString('base64'),
  eventProducerToken: randomBytes(24).toString('hex'),
};
const secretsFile = path.join(scratch, 'secrets.yaml');

/** Each values set and the helm arguments that give it. */
const VALUES_SETS = {
  defaults: ['-f', secretsFile],
  'Temporal Cloud, mTLS': ['-f', path.join(chartDir, 'examples', 'temporal-cloud.yaml')],
  'Temporal Cloud, API key': ['-f', path.join(chartDir, 'examples', 'temporal-cloud-api-key.yaml')],
  'ServiceMonitor on': [
    '-f', secretsFile,
    '--set', 'metrics.serviceMonitor.enabled=true',
    '--set', 'metrics.serviceMonitor.labels.release=prometheus',
  ],
  'self-hosted Temporal, mTLS': [
    '-f', secretsFile,
    '--set', 'temporal.tls.clientCertSecret=temporal-client',
    '--set', 'temporal.tls.serverCaSecret=temporal-ca',
    '--set', 'temporal.tls.serverName=temporal-frontend',
  ],
} satisfies Record<string, string[]>;
type ValuesSet = keyof typeof VALUES_SETS;
const valuesSetNames = Object.keys(VALUES_SETS) as ValuesSet[];

let tools: { helm: string; kubernetesValidate: string };
const renderings = new Map<ValuesSet, Rendering>();

/** helm's output, its caches and settings in the scratch directory; throws on a non-zero exit. */
function helm(args: string[]): string {
  const result = spawnSync(tools.helm, args, {
    encoding: 'utf8',
    env: {
      ...process.env,
      HELM_CACHE_HOME: path.join(scratch, 'helm-cache'),
      HELM_CONFIG_HOME: path.join(scratch, 'helm-config'),
      HELM_DATA_HOME: path.join(scratch, 'helm-data'),
    },
  });
  if (result.status !== 0) throw new Error(`helm ${args.join(' ')} exited ${result.status}:\n${result.stderr}`);
  return result.stdout;
}

function render(chart: string, valuesArgs: string[]): Rendering {
  const stdout = helm(['template', RELEASE, chart, '--kube-version', KUBERNETES_VERSION, ...valuesArgs]);
  const manifests = parseAllDocuments(stdout)
    .map((document) => document.toJS() as Manifest | null)
    .filter((manifest): manifest is Manifest => manifest !== null);
  return { text: stdout, manifests };
}

function rendering(name: ValuesSet): Rendering {
  const found = renderings.get(name);
  if (!found) throw new Error(`${name} was not rendered`);
  return found;
}

function find(manifests: Manifest[], kind: string, name: string): Manifest {
  const found = manifests.find((manifest) => manifest.kind === kind && manifest.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} among ${manifests.map((m) => `${m.kind}/${m.metadata.name}`).join(', ')}`);
  return found;
}

function podTemplateOf(manifest: Manifest): PodTemplate {
  return manifest.spec?.['template'] as PodTemplate;
}

/** The pod template of each role: the api and worker Deployments and the migration Job. */
function podsByRole(manifests: Manifest[]): Record<(typeof SERVICE_ROLES)[number], PodTemplate> {
  return {
    api: podTemplateOf(find(manifests, 'Deployment', `${RELEASE}-api`)),
    worker: podTemplateOf(find(manifests, 'Deployment', `${RELEASE}-worker`)),
    migrate: podTemplateOf(find(manifests, 'Job', `${RELEASE}-migrate`)),
  };
}

function containerOf(pod: PodTemplate, name: string): Container {
  const container = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find((c) => c.name === name);
  if (!container) throw new Error(`no container ${name}`);
  return container;
}

function envOf(container: Container): Map<string, EnvVar> {
  return new Map((container.env ?? []).map((variable) => [variable.name, variable]));
}

/**
 * The environment variables src/config.ts reads: parseConfig is handed an empty environment that
 * records every name it is asked for, so the list is the parser's own, never one written here.
 */
function variablesConfigReads(): Set<string> {
  const asked = new Set<string>();
  const recorder = new Proxy({} as NodeJS.ProcessEnv, {
    get: (_target, name) => {
      if (typeof name === 'string') asked.add(name);
      return undefined;
    },
    has: (_target, name) => {
      if (typeof name === 'string') asked.add(name);
      return false;
    },
  });
  parseConfig(recorder);
  return asked;
}

/** The variables deploy/temporal/bootstrap.sh reads (`${NAME…}`). */
function variablesBootstrapReads(): Set<string> {
  const script = readFileSync(path.join(projectRoot, 'deploy', 'temporal', 'bootstrap.sh'), 'utf8');
  return new Set([...script.matchAll(/\$\{([A-Z][A-Z0-9_]*)/g)].map((match) => match[1]!));
}

function chartAppVersion(): string {
  const chart = parseYaml(readFileSync(path.join(chartDir, 'Chart.yaml'), 'utf8')) as { appVersion: string };
  return chart.appVersion;
}

/** Every variable a rendered pod reads from a Secret, and every key of the chart's own Secret. */
function variablesFromSecrets(): string[] {
  const names = new Set<string>();
  for (const { manifests } of renderings.values()) {
    for (const manifest of manifests) {
      if (manifest.kind === 'Secret') Object.keys(manifest.stringData ?? {}).forEach((key) => names.add(key));
    }
    for (const pod of Object.values(podsByRole(manifests))) {
      for (const container of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
        for (const variable of container.env ?? []) if (variable.valueFrom?.secretKeyRef) names.add(variable.name);
      }
    }
  }
  return [...names];
}

beforeAll(() => {
  tools = ensureHelmTools();
  writeFileSync(secretsFile, `secrets:\n${Object.entries(secretValues).map(([key, value]) => `  ${key}: "${value}"`).join('\n')}\n`);
  for (const name of valuesSetNames) renderings.set(name, render(chartDir, VALUES_SETS[name]));
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('Helm chart deploy/helm/webhooks', () => {
  it.each(valuesSetNames)('passes helm lint --strict with the %s values', (name) => {
    const output = helm(['lint', '--strict', '--kube-version', KUBERNETES_VERSION, chartDir, ...VALUES_SETS[name]]);
    expect(output).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it.each(valuesSetNames)(`renders, with the %s values, only objects valid against the Kubernetes ${KUBERNETES_VERSION} schemas, unknown fields refused`, (name) => {
    const { text, manifests } = rendering(name);
    const file = path.join(scratch, `${name.replaceAll(/\W+/g, '-')}.yaml`);
    writeFileSync(file, text);
    const result = spawnSync(tools.kubernetesValidate, ['--kubernetes-version', KUBERNETES_VERSION, '--strict', file], { encoding: 'utf8' });
    const lines = `${result.stdout}${result.stderr}`.split('\n').filter((line) => line.trim() !== '');
    const majorMinor = KUBERNETES_VERSION.split('.').slice(0, 2).join('.');
    const passed = lines.filter(
      (line) => line.startsWith(`INFO ${file} passed for resource `) && line.endsWith(` against version ${majorMinor}`),
    );
    const withoutSchema = lines.filter((line) =>
      line.startsWith(`WARN ${file} Couldn't find schema for kind ${SERVICE_MONITOR.kind} with api version ${SERVICE_MONITOR.apiVersion} `),
    );
    expect(lines.filter((line) => !passed.includes(line) && !withoutSchema.includes(line))).toEqual([]);
    expect(result.status).toBe(0);
    const serviceMonitors = manifests.filter((manifest) => manifest.kind === SERVICE_MONITOR.kind).length;
    expect(withoutSchema).toHaveLength(serviceMonitors);
    expect(passed).toHaveLength(manifests.length - serviceMonitors);
  });

  it.each(valuesSetNames)('sets, with the %s values, only variables src/config.ts reads; on the bootstrap, the workers\' Temporal connection', (name) => {
    const configVariables = variablesConfigReads();
    const pods = podsByRole(rendering(name).manifests);
    const unread = SERVICE_ROLES.flatMap((role) =>
      [...envOf(containerOf(pods[role], role)).keys()].filter((variable) => !configVariables.has(variable)).map((variable) => `${role}: ${variable}`),
    );
    expect(unread, 'variables src/config.ts does not read').toEqual([]);

    const bootstrap = pods.migrate.spec.initContainers?.find((container) => container.name === 'temporal-bootstrap');
    if (bootstrap) {
      // bootstrap.sh's own variables; the rest is the Temporal connection (read by the `temporal`
      // CLI under the same names), which must be the workers' own, value for value.
      const bootstrapVariables = variablesBootstrapReads();
      const workerEnv = envOf(containerOf(pods.worker, 'worker'));
      const connection = [...envOf(bootstrap).values()].filter((variable) => !bootstrapVariables.has(variable.name));
      for (const variable of connection) expect(workerEnv.get(variable.name), variable.name).toEqual(variable);
      expect([...envOf(bootstrap).keys()]).toEqual(expect.arrayContaining(['TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'TEMPORAL_NAMESPACE_RETENTION']));
    }
  });

  it.each(valuesSetNames)('keeps every secret out of plain values and out of every object but a Secret, with the %s values', (name) => {
    const { manifests } = rendering(name);
    const secretVariables = variablesFromSecrets();
    expect(secretVariables).toEqual(expect.arrayContaining(['DATABASE_URL', 'SECRET_ENCRYPTION_KEY', 'EVENT_PRODUCER_TOKEN', 'TEMPORAL_API_KEY']));
    for (const pod of Object.values(podsByRole(manifests))) {
      for (const container of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
        for (const variable of container.env ?? []) {
          if (secretVariables.includes(variable.name)) {
            expect(variable.value, `${container.name}: ${variable.name}`).toBeUndefined();
            expect(variable.valueFrom?.secretKeyRef?.key, `${container.name}: ${variable.name}`).toBe(variable.name);
          }
        }
      }
    }
    const outsideSecrets = JSON.stringify(manifests.filter((manifest) => manifest.kind !== 'Secret'));
    for (const value of Object.values(secretValues)) expect(outsideSecrets).not.toContain(value);
  });

  it.each(valuesSetNames)('runs each role, with the %s values, with the command of the npm scripts, non-root, read-only, unprivileged', (name) => {
    const pods = podsByRole(rendering(name).manifests);
    for (const role of SERVICE_ROLES) {
      const pod = pods[role];
      expect(containerOf(pod, role).command).toEqual(['node', ...serviceNodeFlags(), 'src/main.ts', role]);
      expect(containerOf(pod, role).image).toBe(`webhook-delivery-service:${chartAppVersion()}`);
      expect(pod.spec.securityContext?.runAsNonRoot).toBe(true);
      expect(pod.spec.automountServiceAccountToken).toBe(false);
      for (const container of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
        expect(container.securityContext).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
        // The one place the service writes (the worker's fallback bundling): an emptyDir.
        const tmp = container.volumeMounts?.find((mount) => mount.mountPath === '/tmp');
        expect(pod.spec.volumes?.find((volume) => volume.name === tmp?.name)?.emptyDir, `${container.name}: /tmp`).toBeDefined();
      }
    }
  });

  it('probes the API on its health routes and the worker on its /metrics server, at ports the pods declare', async () => {
    const pods = podsByRole(rendering('defaults').manifests);
    const api = containerOf(pods.api, 'api');
    const worker = containerOf(pods.worker, 'worker');
    const portNamed = (container: Container, port: string | number) =>
      typeof port === 'number' ? port : container.ports?.find((declared) => declared.name === port)?.containerPort;

    const apiPort = Number(envOf(api).get('PORT')?.value);
    expect(apiPort).toBeGreaterThan(0);
    const apiProbes = [api.startupProbe, api.livenessProbe, api.readinessProbe];
    expect(apiProbes.map((probe) => probe?.httpGet.path)).toEqual(['/healthz', '/healthz', '/readyz']);
    for (const probe of apiProbes) {
      expect(portNamed(api, probe!.httpGet.port)).toBe(apiPort);
      expect(healthRouter.routes.some((route) => route.method === 'GET' && route.path === probe!.httpGet.path), probe!.httpGet.path).toBe(true);
    }
    expect((await healthRouter.request('/healthz')).status).toBe(200);

    // A worker serves no API: its probes call the /metrics server the worker role starts.
    const metricsPort = Number(envOf(worker).get('METRICS_PORT')?.value);
    expect(envOf(worker).get('METRICS_HOST')?.value).toBe('0.0.0.0');
    expect(envOf(worker).has('PORT')).toBe(false);
    const server = await serveMetrics(createMetrics(), undefined, { host: '127.0.0.1', port: 0 });
    try {
      const { port } = server.address() as AddressInfo;
      for (const probe of [worker.startupProbe, worker.livenessProbe, worker.readinessProbe]) {
        expect(portNamed(worker, probe!.httpGet.port)).toBe(metricsPort);
        expect((await fetch(`http://127.0.0.1:${port}${probe!.httpGet.path}`)).status).toBe(200);
      }
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('runs the Temporal bootstrap and the migrations in a pre-install and pre-upgrade hook, from hook objects created before it', () => {
    const { manifests } = rendering('defaults');
    const job = find(manifests, 'Job', `${RELEASE}-migrate`);
    const hookOf = (manifest: Manifest) => ({
      events: (manifest.metadata.annotations?.['helm.sh/hook'] ?? '').split(',').sort(),
      weight: Number(manifest.metadata.annotations?.['helm.sh/hook-weight'] ?? 0),
    });
    expect(hookOf(job).events).toEqual(['pre-install', 'pre-upgrade']);
    // The pods of the new release are no hooks: Helm applies them once the Job has succeeded.
    for (const kind of ['Deployment', 'Service', 'Secret', 'HorizontalPodAutoscaler', 'PodDisruptionBudget']) {
      for (const manifest of manifests.filter((m) => m.kind === kind && m.metadata.name !== `${RELEASE}-migrate`)) {
        expect(manifest.metadata.annotations?.['helm.sh/hook'], `${kind}/${manifest.metadata.name}`).toBeUndefined();
      }
    }
    // What the Job reads must exist before the first install: hooks of the same events with a lower weight.
    const pod = podTemplateOf(job);
    expect(pod.spec.initContainers?.map((container) => container.name)).toEqual(['temporal-bootstrap']);
    const referenced = [
      ...[...pod.spec.containers, ...(pod.spec.initContainers ?? [])].flatMap((container) =>
        (container.env ?? []).flatMap((variable) => (variable.valueFrom?.secretKeyRef ? [['Secret', variable.valueFrom.secretKeyRef.name]] : [])),
      ),
      ...(pod.spec.volumes ?? []).flatMap((volume) => (volume.configMap ? [['ConfigMap', volume.configMap.name]] : [])),
    ] as [string, string][];
    expect(referenced.length).toBeGreaterThan(0);
    for (const [kind, name] of referenced) {
      const dependency = hookOf(find(manifests, kind, name));
      expect(dependency.events, `${kind}/${name}`).toEqual(hookOf(job).events);
      expect(dependency.weight, `${kind}/${name}`).toBeLessThan(hookOf(job).weight);
    }
    // With a Secret of the user's own, the Job reads that one.
    const cloudJob = podTemplateOf(find(rendering('Temporal Cloud, mTLS').manifests, 'Job', `${RELEASE}-migrate`));
    expect(envOf(containerOf(cloudJob, 'migrate')).get('DATABASE_URL')?.valueFrom?.secretKeyRef?.name).toBe('webhooks');
  });

  it('bootstraps Temporal with deploy/temporal/bootstrap.sh, also from the packaged chart', () => {
    const script = readFileSync(path.join(projectRoot, 'deploy', 'temporal', 'bootstrap.sh'), 'utf8');
    const packaged = path.join(scratch, 'package');
    helm(['package', chartDir, '--destination', packaged]);
    const archive = path.join(packaged, `webhooks-${parseYaml(readFileSync(path.join(chartDir, 'Chart.yaml'), 'utf8')).version}.tgz`);
    for (const { manifests } of [rendering('defaults'), render(archive, VALUES_SETS.defaults)]) {
      const configMap = find(manifests, 'ConfigMap', `${RELEASE}-bootstrap-script`);
      expect(configMap.data?.['temporal-bootstrap.sh']).toBe(script.trimEnd());
      const bootstrap = containerOf(podTemplateOf(find(manifests, 'Job', `${RELEASE}-migrate`)), 'temporal-bootstrap');
      expect(bootstrap.command).toEqual(['/bin/sh', '/bootstrap/temporal-bootstrap.sh', 'namespace']);
    }
  });

  it.each(valuesSetNames)('mounts, with the %s values, each file a TEMPORAL_TLS_*_PATH variable names, read-only from its Secret', (name) => {
    for (const pod of Object.values(podsByRole(rendering(name).manifests))) {
      for (const container of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
        const files = (container.env ?? []).filter((variable) => /^TEMPORAL_TLS_\w+_PATH$/.test(variable.name));
        for (const { name: variable, value = '' } of files) {
          const mount = container.volumeMounts?.find((m) => m.mountPath === path.posix.dirname(value));
          expect(mount?.readOnly, `${container.name}: ${variable}`).toBe(true);
          const volume = pod.spec.volumes?.find((v) => v.name === mount?.name);
          expect(volume?.secret?.items?.map((item) => item.path), `${container.name}: ${variable}`).toContain(path.posix.basename(value));
        }
      }
    }
  });

  it('connects to Temporal Cloud over mTLS: the client certificate of its Secret, no bootstrap', () => {
    const { manifests } = rendering('Temporal Cloud, mTLS');
    const pods = podsByRole(manifests);
    for (const role of ['api', 'worker'] as const) {
      const env = envOf(containerOf(pods[role], role));
      expect(env.get('TEMPORAL_ADDRESS')?.value).toMatch(/\.tmprl\.cloud:7233$/);
      expect(env.get('TEMPORAL_TLS')?.value).toBe('true');
      expect([...env.keys()].filter((variable) => variable.endsWith('_PATH'))).toEqual(['TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH']);
      expect(pods[role].spec.volumes?.find((volume) => volume.secret)?.secret).toEqual({
        secretName: 'temporal-cloud-client',
        defaultMode: 0o440,
        items: [{ key: 'tls.crt', path: 'tls.crt' }, { key: 'tls.key', path: 'tls.key' }],
      });
      expect(env.has('TEMPORAL_API_KEY')).toBe(false);
    }
    expect(pods.migrate.spec.initContainers).toBeUndefined();
    expect(manifests.some((manifest) => manifest.kind === 'ConfigMap')).toBe(false);
  });

  it('bootstraps a self-hosted Temporal over mTLS with the certificate and CA the workers use', () => {
    const pods = podsByRole(rendering('self-hosted Temporal, mTLS').manifests);
    const bootstrap = envOf(containerOf(pods.migrate, 'temporal-bootstrap'));
    expect([...bootstrap.keys()].filter((variable) => variable.startsWith('TEMPORAL_TLS')).sort()).toEqual([
      'TEMPORAL_TLS',
      'TEMPORAL_TLS_CLIENT_CERT_PATH',
      'TEMPORAL_TLS_CLIENT_KEY_PATH',
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
      'TEMPORAL_TLS_SERVER_NAME',
    ]);
    expect(pods.migrate.spec.volumes?.map((volume) => volume.secret?.secretName).filter(Boolean).sort()).toEqual(['temporal-ca', 'temporal-client']);
  });

  it('connects to Temporal Cloud with an API key read from the Secret, over TLS', () => {
    const pods = podsByRole(rendering('Temporal Cloud, API key').manifests);
    for (const role of ['api', 'worker'] as const) {
      const env = envOf(containerOf(pods[role], role));
      expect(env.get('TEMPORAL_API_KEY')?.valueFrom?.secretKeyRef).toEqual({ name: 'webhooks', key: 'TEMPORAL_API_KEY' });
      expect(env.get('TEMPORAL_TLS')?.value).toBe('true');
      expect(env.has('TEMPORAL_TLS_CLIENT_CERT_PATH')).toBe(false);
    }
  });

  it('connects to a self-hosted Temporal in plain gRPC by default', () => {
    const env = envOf(containerOf(podsByRole(rendering('defaults').manifests).worker, 'worker'));
    expect(env.get('TEMPORAL_ADDRESS')?.value).toBe('temporal-frontend.temporal.svc.cluster.local:7233');
    expect([...env.keys()].filter((variable) => variable.startsWith('TEMPORAL_TLS') || variable === 'TEMPORAL_API_KEY')).toEqual([]);
  });

  it('lists /metrics of every api and worker pod on a headless Service, scraped by the ServiceMonitor when enabled', () => {
    const { manifests } = rendering('ServiceMonitor on');
    const pods = podsByRole(manifests);
    const metricsService = find(manifests, 'Service', `${RELEASE}-metrics`);
    const serviceSpec = metricsService.spec as { clusterIP: string; selector: Record<string, string>; ports: { name: string; targetPort: string }[] };
    expect(serviceSpec.clusterIP).toBe('None');
    for (const role of ['api', 'worker'] as const) {
      expect(pods[role].metadata.labels).toMatchObject(serviceSpec.selector);
      const container = containerOf(pods[role], role);
      const env = envOf(container);
      expect(env.get('METRICS_HOST')?.value).toBe('0.0.0.0');
      expect(container.ports?.find((port) => port.name === 'metrics')?.containerPort).toBe(Number(env.get('METRICS_PORT')?.value));
    }
    expect(serviceSpec.ports.map((port) => port.targetPort)).toEqual(['metrics']);
    // The API's own Service routes to the API only, never to /metrics.
    const apiService = find(manifests, 'Service', `${RELEASE}-api`).spec as { ports: { targetPort: string }[] };
    expect(apiService.ports.map((port) => port.targetPort)).toEqual(['http']);
    // The worker's SDK exporter stays on the pod's loopback, merged into /metrics.
    const workerEnv = envOf(containerOf(pods.worker, 'worker'));
    expect(workerEnv.get('TEMPORAL_SDK_METRICS_PORT')?.value).not.toBe(workerEnv.get('METRICS_PORT')?.value);

    const monitor = find(manifests, SERVICE_MONITOR.kind, RELEASE);
    expect(monitor.apiVersion).toBe(SERVICE_MONITOR.apiVersion);
    expect(monitor.metadata.labels?.['release']).toBe('prometheus');
    const monitorSpec = monitor.spec as { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string }[] };
    expect(metricsService.metadata.labels).toMatchObject(monitorSpec.selector.matchLabels);
    expect(find(manifests, 'Service', `${RELEASE}-api`).metadata.labels).not.toMatchObject(monitorSpec.selector.matchLabels);
    expect(monitorSpec.endpoints).toEqual([expect.objectContaining({ port: 'metrics', path: '/metrics' })]);
    // The alert rules select the jobs webhooks-api and webhooks-worker: each pod's role names its job.
    expect(monitorSpec.endpoints[0]).toMatchObject({
      relabelings: [{ sourceLabels: ['__meta_kubernetes_pod_label_app_kubernetes_io_component'], targetLabel: 'job', replacement: 'webhooks-$1' }],
    });
    for (const role of ['api', 'worker'] as const) expect(pods[role].metadata.labels?.['app.kubernetes.io/component']).toBe(role);
    expect(rendering('defaults').manifests.some((manifest) => manifest.kind === SERVICE_MONITOR.kind)).toBe(false);
  });

  it('keeps an API pod serving for a few seconds after its termination begins, while routes to it are withdrawn', () => {
    const pods = podsByRole(rendering('defaults').manifests);
    const api = containerOf(pods.api, 'api');
    expect(api.lifecycle?.preStop?.exec?.command).toEqual(['sleep', '5']);
    // The sleep comes out of the grace period: the process still has time to finish its requests after it.
    expect(pods.api.spec.terminationGracePeriodSeconds).toBeGreaterThan(5);
    expect(containerOf(pods.worker, 'worker').lifecycle).toBeUndefined();
  });

  it('scales the workers with an autoscaling/v2 HorizontalPodAutoscaler, and gives each role a PodDisruptionBudget', () => {
    const { manifests } = rendering('defaults');
    const autoscaler = find(manifests, 'HorizontalPodAutoscaler', `${RELEASE}-worker`);
    expect(autoscaler.apiVersion).toBe('autoscaling/v2');
    expect(autoscaler.spec?.['scaleTargetRef']).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: `${RELEASE}-worker` });
    // The autoscaler owns the worker count: the Deployment states none.
    expect(find(manifests, 'Deployment', `${RELEASE}-worker`).spec?.['replicas']).toBeUndefined();
    expect(find(manifests, 'Deployment', `${RELEASE}-api`).spec?.['replicas']).toBe(2);
    const pods = podsByRole(manifests);
    for (const role of ['api', 'worker'] as const) {
      const budget = find(manifests, 'PodDisruptionBudget', `${RELEASE}-${role}`).spec as { selector: { matchLabels: Record<string, string> } };
      expect(pods[role].metadata.labels).toMatchObject(budget.selector.matchLabels);
      const other = role === 'api' ? pods.worker : pods.api;
      expect(other.metadata.labels).not.toMatchObject(budget.selector.matchLabels);
    }
  });

  it('refuses to render without the required secrets, with a bad encryption key, or with a variable it sets itself in config', () => {
    const attempt = (args: string[]) => () => render(chartDir, args);
    expect(attempt([])).toThrow(/secrets\.encryptionKey is required/);
    expect(attempt(['--set', `secrets.encryptionKey=${secretValues.encryptionKey}`])).toThrow(/secrets\.databaseUrl is required/);
    expect(attempt(['-f', secretsFile, '--set', 'secrets.encryptionKey=c2hvcnQ='])).toThrow(/must be 32 bytes encoded in base64/);
    expect(attempt(['-f', secretsFile, '--set', 'config.TEMPORAL_ADDRESS=elsewhere:7233'])).toThrow(/config\.TEMPORAL_ADDRESS is set by the chart/);
    expect(attempt(['-f', secretsFile, '--set', 'api.replica=3'])).toThrow(/additional properties 'replica' not allowed/);
    // A worker's pods must outlast the wait for its sends, which a longer DELIVERY_TIMEOUT_MS lengthens.
    expect(attempt(['-f', secretsFile, '--set-string', 'config.DELIVERY_TIMEOUT_MS=120000'])).toThrow(
      /worker\.terminationGracePeriodSeconds \(45\) must be at least 130: a stopping worker waits up to DELIVERY_TIMEOUT_MS and 5 s \(125 s\)/,
    );
    expect(attempt(['-f', secretsFile, '--set-string', 'config.DELIVERY_TIMEOUT_MS=120000', '--set', 'worker.terminationGracePeriodSeconds=130'])).not.toThrow();
  });

  it('versions the chart with the service: its appVersion is package.json version', () => {
    const manifest = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string };
    expect(chartAppVersion()).toBe(manifest.version);
  });
});
