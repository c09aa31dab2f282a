import { readdirSync, readFileSync, statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PROMETHEUS_VERSION } from '../scripts/promtool.mjs';
import { TEMPORAL_MODULES } from '../src/local/temporal-tools.mjs';
import { SERVICE_DYNAMIC_CONFIG } from '../src/local/dynamic-config.ts';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';
import { serviceNodeFlags } from './support/service-command.ts';

/*
 * Static checks of the production topology (docker-compose.yml, Dockerfile, .dockerignore).
 * No Docker engine is needed: the files are parsed and their properties asserted.
 */

const composeUrl = new URL('../docker-compose.yml', import.meta.url);
const dockerfileUrl = new URL('../Dockerfile', import.meta.url);
const dockerignoreUrl = new URL('../.dockerignore', import.meta.url);
const configurationDocUrl = new URL('../docs/configuration.md', import.meta.url);
const repoRootUrl = new URL('../', import.meta.url);

const composeText = readFileSync(composeUrl, 'utf8');
const compose = asRecord(parse(composeText, { merge: true }), 'docker-compose.yml');
const services = asRecord(compose.services, 'services');
const topLevelVolumes = compose.volumes === undefined ? {} : asRecord(compose.volumes, 'volumes');
const bootstrapScript = readFileSync(new URL('../deploy/temporal/bootstrap.sh', import.meta.url), 'utf8');

const APP_ROLES = ['api', 'worker'] as const;
const EXPECTED_SERVICES = [
  'postgres',
  'temporal-admin-tools',
  'temporal',
  'temporal-create-namespace',
  'temporal-ui',
  'proxy',
  ...APP_ROLES,
];

// ---------------------------------------------------------------------------
// Helpers turning the loosely typed compose document into checked values.
// ---------------------------------------------------------------------------

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function asRecord(value: unknown, what: string): Record<string, unknown> {
  if (!isRecord(value)) throw new Error(`${what} is not a mapping`);
  return value;
}

function service(name: string): Record<string, unknown> {
  return asRecord(services[name], `service ${name}`);
}

/** The environment of a service, whether written as a mapping or as a KEY=value list. */
function environmentOf(name: string): Record<string, string> {
  const raw = service(name).environment;
  const env: Record<string, string> = {};
  if (raw === undefined) return env;
  if (Array.isArray(raw)) {
    for (const entry of raw) {
      const text = String(entry);
      const eq = text.indexOf('=');
      if (eq === -1) env[text] = '';
      else env[text.slice(0, eq)] = text.slice(eq + 1);
    }
    return env;
  }
  for (const [key, value] of Object.entries(asRecord(raw, `${name}.environment`))) {
    env[key] = value === null ? '' : String(value);
  }
  return env;
}

/** depends_on as `target -> condition`, the short list form meaning `service_started`. */
function dependenciesOf(name: string): Record<string, string> {
  const raw = service(name).depends_on;
  const deps: Record<string, string> = {};
  if (raw === undefined) return deps;
  if (Array.isArray(raw)) {
    for (const target of raw) deps[String(target)] = 'service_started';
    return deps;
  }
  for (const [target, spec] of Object.entries(asRecord(raw, `${name}.depends_on`))) {
    deps[target] = isRecord(spec) && typeof spec.condition === 'string' ? spec.condition : 'service_started';
  }
  return deps;
}

/** command/entrypoint as one string (a list is joined with spaces). */
function commandText(name: string, key: 'command' | 'entrypoint' = 'command'): string {
  const raw = service(name)[key];
  if (raw === undefined) return '';
  return Array.isArray(raw) ? raw.map(String).join(' ') : String(raw);
}

/** command as argv: a string is split on whitespace, as compose does for simple commands. */
function commandArgv(name: string): string[] {
  const raw = service(name).command;
  if (Array.isArray(raw)) return raw.map(String);
  if (typeof raw === 'string') return raw.trim().split(/\s+/);
  return [];
}

interface PublishedPort {
  hostIp: string | undefined;
  hostStart: number;
  hostEnd: number;
  target: number;
}

/** Parses `ports` in short ("[ip:]host[-host]:container[/proto]") and long syntax. */
function publishedPorts(name: string): PublishedPort[] {
  const raw = service(name).ports;
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw new Error(`${name}.ports is not a list`);
  return raw.map((entry): PublishedPort => {
    if (isRecord(entry)) {
      const [start, end] = String(entry.published ?? '').split('-');
      return {
        hostIp: typeof entry.host_ip === 'string' ? entry.host_ip : undefined,
        hostStart: Number(start),
        hostEnd: Number(end ?? start),
        target: Number(entry.target),
      };
    }
    const parts = String(entry).replace(/\/(tcp|udp)$/, '').split(':');
    const target = parts.pop();
    const host = parts.pop();
    const hostIp = parts.length > 0 ? parts.join(':') : undefined;
    if (host === undefined || target === undefined) throw new Error(`${name} publishes no host port: ${String(entry)}`);
    const [start, end] = host.split('-');
    return { hostIp, hostStart: Number(start), hostEnd: Number(end ?? start), target: Number(target) };
  });
}

function publishesOnHost(name: string, hostPort: number, target: number): boolean {
  return publishedPorts(name).some(
    (port) => port.target === target && port.hostStart <= hostPort && hostPort <= port.hostEnd,
  );
}

/** Where a service mounts a host path (`source`), failing when it does not. */
function mountOf(name: string, source: string): string {
  const mount = ((service(name).volumes ?? []) as unknown[]).map(String).find((volume) => volume.split(':')[0] === source);
  if (!mount) throw new Error(`${name} does not mount ${source}`);
  return mount.split(':')[1]!;
}

function replicasOf(name: string): number {
  const deploy = service(name).deploy;
  if (!isRecord(deploy)) return 1;
  return typeof deploy.replicas === 'number' ? deploy.replicas : Number.NaN;
}

/** `repo/name:tag` -> tag (undefined when no tag). A registry port is not a tag. */
function imageTag(image: string): string | undefined {
  const withoutDigest = image.split('@')[0] ?? image;
  const lastSegment = withoutDigest.slice(withoutDigest.lastIndexOf('/') + 1);
  const colon = lastSegment.indexOf(':');
  return colon === -1 ? undefined : lastSegment.slice(colon + 1);
}

function imageOf(name: string): string {
  const image = service(name).image;
  if (typeof image !== 'string') throw new Error(`service ${name} has no image`);
  return image;
}

/** Names of the host variables referenced as ${NAME}, ${NAME:-default}, ${NAME:?message}... */
function interpolatedVariables(value: string): string[] {
  return [...value.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)/g)].map((match) => match[1] ?? '');
}

/** Substitutes interpolations the way compose would with an empty host environment, defaults applied. */
function withDefaults(value: string): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?[^}]*\}/g, (_match, name: string, fallback?: string) =>
    fallback ?? `unset-${name}`,
  );
}

/** Dockerfile instructions, with line continuations joined and comments dropped. */
function dockerfileInstructions(text: string): { keyword: string; args: string }[] {
  const logical: string[] = [];
  let current = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line)) continue;
    if (line.trimEnd().endsWith('\\')) {
      current += `${line.trimEnd().slice(0, -1)} `;
      continue;
    }
    current += line;
    if (current.trim() !== '') logical.push(current.trim());
    current = '';
  }
  return logical.map((instruction) => {
    const space = instruction.search(/\s/);
    return space === -1
      ? { keyword: instruction.toUpperCase(), args: '' }
      : { keyword: instruction.slice(0, space).toUpperCase(), args: instruction.slice(space + 1).trim() };
  });
}

// ---------------------------------------------------------------------------

describe('docker-compose.yml', () => {
  it('defines postgres, the Temporal server with its setup jobs and UI, the api with its proxy and the worker', () => {
    expect(Object.keys(services)).toEqual(expect.arrayContaining(EXPECTED_SERVICES));
  });

  it('pins every image to an explicit tag (never latest) and builds the rest from the Dockerfile', () => {
    for (const [name, spec] of Object.entries(services)) {
      const definition = asRecord(spec, `service ${name}`);
      if (definition.image === undefined) {
        expect(definition.build, `${name} has neither image nor build`).toBeDefined();
        continue;
      }
      const image = imageOf(name);
      const tag = imageTag(image);
      expect(tag, `${name} uses ${image} without a tag`).toBeDefined();
      expect(tag, `${name} uses ${image}`).not.toBe('latest');
      expect(tag, `${name} takes its tag from the environment`).not.toMatch(/\$/);
    }
  });

  it('uses plain temporalio/server with separate admin-tools jobs instead of the deprecated auto-setup image', () => {
    const images = Object.keys(services)
      .filter((name) => service(name).image !== undefined)
      .map(imageOf);
    expect(images.filter((image) => image.startsWith('temporalio/auto-setup'))).toEqual([]);
    expect(imageOf('temporal')).toMatch(/^temporalio\/server:/);
    expect(imageOf('temporal-admin-tools')).toMatch(/^temporalio\/admin-tools:/);
    expect(imageOf('temporal-create-namespace')).toMatch(/^temporalio\/admin-tools:/);
    expect(imageOf('temporal-ui')).toMatch(/^temporalio\/ui:/);
  });

  it('runs the Temporal server and UI that the pinned CLI embeds (the ones npm run cluster builds), admin-tools in lockstep', () => {
    const serverVersion = TEMPORAL_MODULES.server.version.replace(/^v/, '');
    expect(imageTag(imageOf('temporal'))).toBe(serverVersion);
    expect(imageTag(imageOf('temporal-ui'))).toBe(TEMPORAL_MODULES.ui.version.replace(/^v/, ''));
    for (const job of ['temporal-admin-tools', 'temporal-create-namespace']) {
      expect(imageTag(imageOf(job)), job).toMatch(new RegExp(`^${serverVersion.replaceAll('.', '\\.')}(-|$)`));
    }
  });

  it('runs postgres 15 (Debian\'s major version) with deploy/postgres/production.conf, a pg_isready healthcheck and its data on a named volume', () => {
    expect(imageOf('postgres')).toMatch(/^postgres:15(\.|-|$)/);
    const settings = mountOf('postgres', './deploy/postgres/production.conf');
    expect(commandArgv('postgres')).toEqual(expect.arrayContaining([`config_file=${settings}`]));
    const healthcheck = asRecord(service('postgres').healthcheck, 'postgres.healthcheck');
    const test = Array.isArray(healthcheck.test) ? healthcheck.test.join(' ') : String(healthcheck.test);
    expect(test).toContain('pg_isready');

    const volumes = (service('postgres').volumes ?? []) as unknown[];
    const dataVolume = volumes.map(String).find((volume) => volume.endsWith(':/var/lib/postgresql/data'));
    expect(dataVolume, 'postgres data directory is not mounted').toBeDefined();
    const source = dataVolume?.split(':')[0] ?? '';
    expect(source, 'the data volume must be named, not a host path').toMatch(/^[A-Za-z0-9][\w.-]*$/);
    expect(Object.keys(topLevelVolumes)).toContain(source);
  });

  it('creates the webhooks database from an init script in ./deploy/postgres-init', () => {
    const volumes = ((service('postgres').volumes ?? []) as unknown[]).map(String);
    const initMount = volumes.find((volume) => volume.split(':')[1] === '/docker-entrypoint-initdb.d');
    expect(initMount?.split(':')[0]).toBe('./deploy/postgres-init');

    const initDir = new URL('deploy/postgres-init/', repoRootUrl);
    const scripts = readdirSync(initDir).filter((file) => /\.(sql|sh)$/.test(file));
    expect(scripts.length).toBeGreaterThan(0);
    const sql = scripts.map((file) => readFileSync(new URL(file, initDir), 'utf8')).join('\n');
    expect(sql).toMatch(/CREATE DATABASE\s+"?webhooks"?/i);
    expect(sql).toMatch(/CREATE (ROLE|USER)\s+"?webhooks"?/i);
  });

  it('runs the Temporal server with deploy/temporal/server/production.yaml on the postgres service', () => {
    const env = environmentOf('temporal');
    const postgresEnv = environmentOf('postgres');
    expect(env.POSTGRES_SEEDS).toBe('postgres');
    expect(services).toHaveProperty(env.POSTGRES_SEEDS ?? '');
    expect(env.DB_PORT).toBe('5432');
    expect(env.POSTGRES_USER).toBe(postgresEnv.POSTGRES_USER);
    expect(env.POSTGRES_PWD).toBe(postgresEnv.POSTGRES_PASSWORD);
    expect(env.BIND_ON_IP).toBe('0.0.0.0');
    const deployDir = mountOf('temporal', './deploy/temporal');
    expect(deployDir).toBe('/etc/temporal/deploy');
    expect(commandText('temporal')).toContain('temporal-server --root /etc/temporal --config deploy/server --env production --allow-no-auth start');
    expect(env.DYNAMIC_CONFIG_FILE_PATH).toBe(`${deployDir}/dynamicconfig/production.yaml`);
    expect(readFileSync(new URL('deploy/temporal/server/production.yaml', repoRootUrl), 'utf8')).toMatch(/pluginName: postgres12/);
  });

  it('sets up the schemas with deploy/temporal/bootstrap.sh before the server starts', () => {
    expect(mountOf('temporal-admin-tools', './deploy/temporal')).toBe('/deploy');
    expect(commandText('temporal-admin-tools', 'entrypoint')).toBe('/bin/sh /deploy/bootstrap.sh schema');
    expect(environmentOf('temporal-admin-tools')).toEqual(
      Object.fromEntries(Object.entries(environmentOf('temporal')).filter(([key]) => ['POSTGRES_SEEDS', 'DB_PORT', 'POSTGRES_USER', 'POSTGRES_PWD'].includes(key))),
    );
    expect(bootstrapScript).toContain('temporal-sql-tool');
    expect(bootstrapScript).toContain('--plugin postgres12');
    for (const step of ['create-database', 'setup-schema -v 0.0', 'update-schema -d "$versions"']) expect(bootstrapScript).toContain(step);
    expect(bootstrapScript).toMatch(/"\$\{DBNAME:-temporal\}:temporal" "\$\{VISIBILITY_DBNAME:-temporal_visibility\}:visibility"/);
    expect(dependenciesOf('temporal-admin-tools')).toMatchObject({ postgres: 'service_healthy' });
    expect(dependenciesOf('temporal')).toMatchObject({
      'temporal-admin-tools': 'service_completed_successfully',
    });
  });

  it('creates the default namespace and the search attributes with bootstrap.sh once the server reports healthy', () => {
    expect(mountOf('temporal-create-namespace', './deploy/temporal')).toBe('/deploy');
    expect(commandText('temporal-create-namespace')).toContain('/bin/sh /deploy/bootstrap.sh namespace');
    expect(bootstrapScript).toMatch(/operator namespace create --namespace "\$ns" --retention "\$retention"/);
    expect(bootstrapScript).toContain('ns=${TEMPORAL_NAMESPACE:-default}');
    expect(service('temporal').healthcheck).toBeDefined();
    expect(dependenciesOf('temporal-create-namespace')).toMatchObject({ temporal: 'service_healthy' });
  });

  it('registers in bootstrap.sh exactly the search attributes the workflows use', () => {
    const listed = /^SEARCH_ATTRIBUTES="([^"]*)"$/m.exec(bootstrapScript)?.[1]?.split(' ');
    expect(listed).toEqual(SEARCH_ATTRIBUTES.map((key) => key.name));
    expect(bootstrapScript).toContain('--type Keyword');
    expect(SEARCH_ATTRIBUTES.every((key) => key.type === 'KEYWORD')).toBe(true);
  });

  it('gives the production server the dynamic config the dev server gets by flag', () => {
    const file = asRecord(parse(readFileSync(new URL('deploy/temporal/dynamicconfig/production.yaml', repoRootUrl), 'utf8')), 'dynamic config');
    const values = Object.fromEntries(Object.entries(file).map(([key, entries]) => [key, (entries as { value: unknown }[])[0]?.value]));
    expect(values).toMatchObject(SERVICE_DYNAMIC_CONFIG);
  });

  it('serves the Temporal UI with deploy/temporal/ui against temporal:7233 on host port 8233', () => {
    expect(environmentOf('temporal-ui').TEMPORAL_ADDRESS).toBe('temporal:7233');
    expect(mountOf('temporal-ui', './deploy/temporal/ui')).toBe('/home/ui-server/deploy');
    expect(commandText('temporal-ui', 'entrypoint')).toBe('./ui-server --root /home/ui-server --config deploy --env production start');
    expect(publishesOnHost('temporal-ui', 8233, 8080)).toBe(true);
  });

  it('builds the api and the worker from the Dockerfile and runs a different role in each', () => {
    for (const role of APP_ROLES) {
      const build = service(role).build;
      const context = isRecord(build) ? build.context : build;
      const dockerfile = isRecord(build) ? (build.dockerfile ?? 'Dockerfile') : 'Dockerfile';
      expect([context, dockerfile], role).toEqual(['.', 'Dockerfile']);
      const argv = commandArgv(role);
      const runsRole =
        argv.join(' ') === `npm run ${role}` ||
        (argv[0] === 'node' && argv.includes('src/main.ts') && argv.at(-1) === role);
      expect(runsRole, `${role} runs: ${argv.join(' ')}`).toBe(true);
      // Run directly, it gets the node flags `npm run <role>` gives it (the heap limit).
      if (argv[0] === 'node') expect(argv.slice(1, -2), `${role} node flags`).toEqual(serviceNodeFlags());
    }
    expect(commandArgv('api')).not.toEqual(commandArgv('worker'));
  });

  it("binds every interface of the containers, so that each replica's /metrics is reachable on the compose network, never on the host", () => {
    for (const role of APP_ROLES) {
      expect(environmentOf(role).HOST, role).toBe('0.0.0.0');
      expect(environmentOf(role).METRICS_HOST, role).toBe('0.0.0.0');
      const metricsPort = environmentOf(role).METRICS_PORT ?? '9464';
      expect(((service(role).expose ?? []) as unknown[]).map(String), role).toContain(metricsPort);
      expect(publishedPorts(role).some((port) => port.target === Number(metricsPort)), role).toBe(false);
    }
    const metricsPort = environmentOf('worker').METRICS_PORT ?? '9464';
    const healthcheck = asRecord(service('worker').healthcheck, 'worker.healthcheck');
    expect((healthcheck.test as unknown[]).map(String).join(' ')).toContain(`127.0.0.1:${metricsPort}/metrics`);
  });

  it('scales the api and the worker horizontally, with at least two replicas each', () => {
    for (const role of APP_ROLES) expect(replicasOf(role), role).toBeGreaterThanOrEqual(2);
  });

  it('gives the api and the worker the same environment, written once in the x-app-env anchor', () => {
    const shared = asRecord(compose['x-app-env'], 'x-app-env');
    const sharedEnv = Object.fromEntries(Object.entries(shared).map(([key, value]) => [key, String(value)]));
    expect(environmentOf('worker')).toEqual(sharedEnv);

    const { PORT, ...apiShared } = environmentOf('api');
    expect(apiShared).toEqual(sharedEnv);
    expect(PORT).toBe('8080');

    expect(composeText).toMatch(/^x-app-env: &app-env$/m);
    expect(composeText.match(/\*app-env\b/g)?.length ?? 0).toBeGreaterThanOrEqual(APP_ROLES.length);
    expect(composeText.match(/^\s*DATABASE_URL:/gm)).toHaveLength(1);
  });

  it('points DATABASE_URL at the webhooks database of the postgres service', () => {
    const env = environmentOf('worker');
    const url = new URL(withDefaults(env.DATABASE_URL ?? ''));
    expect(url.protocol).toMatch(/^postgres(ql)?:$/);
    expect(url.hostname).toBe('postgres');
    expect(services).toHaveProperty(url.hostname);
    expect(url.port).toBe('5432');
    expect(url.username).toBe('webhooks');
    expect(url.password).not.toBe('');
    expect(url.pathname).toBe('/webhooks');
  });

  it('points TEMPORAL_ADDRESS at port 7233 of the temporal service, namespace default, queue webhook-deliveries', () => {
    const env = environmentOf('worker');
    const [host, port] = (env.TEMPORAL_ADDRESS ?? '').split(':');
    expect(services).toHaveProperty(host ?? '');
    expect(host).toBe('temporal');
    expect(port).toBe('7233');
    expect(env.TEMPORAL_NAMESPACE).toBe('default');
    expect(env.TEMPORAL_TASK_QUEUE).toBe('webhook-deliveries');
    expect(env.LOG_LEVEL).toBe('info');
  });

  it('requires SECRET_ENCRYPTION_KEY from the host and says how to set it; EVENT_PRODUCER_TOKEN stays off unless the host sets it', () => {
    const env = environmentOf('worker');
    const match = /^\$\{SECRET_ENCRYPTION_KEY:\?(.+)\}$/.exec(env.SECRET_ENCRYPTION_KEY ?? '');
    expect(match, 'SECRET_ENCRYPTION_KEY must be ${SECRET_ENCRYPTION_KEY:?message}').not.toBeNull();
    expect(match?.[1]).toContain('SECRET_ENCRYPTION_KEY');
    expect(env.EVENT_PRODUCER_TOKEN).toBe('${EVENT_PRODUCER_TOKEN:-}');
  });

  it('serves the api on host port 8080 through the proxy, which resolves every replica again every few seconds; the api checks GET /readyz', () => {
    expect(publishedPorts('api'), 'a published port would take one host port per replica').toEqual([]);
    expect(((service('api').expose ?? []) as unknown[]).map(String)).toContain('8080');
    expect(publishesOnHost('proxy', 8080, 8080)).toBe(true);
    expect(imageTag(imageOf('proxy'))).toMatch(/^\d+\.\d+$/);
    expect(mountOf('proxy', './deploy/proxy/api.conf.template')).toBe('/etc/nginx/templates/default.conf.template');
    // Sourced before the templates are rendered (the image runs executable *.envsh files only).
    expect(mountOf('proxy', './deploy/proxy/api-resolver.envsh')).toMatch(/^\/docker-entrypoint\.d\/\d\d-[\w-]+\.envsh$/);
    expect(statSync(new URL('../deploy/proxy/api-resolver.envsh', import.meta.url)).mode & 0o111).not.toBe(0);
    const template = readFileSync(new URL('../deploy/proxy/api.conf.template', import.meta.url), 'utf8');
    expect(template).toMatch(/^resolver \$\{API_RESOLVER\} valid=\d+s/m);
    expect(template).toMatch(/^\s*listen 8080;$/m);
    // A variable in proxy_pass is what makes nginx resolve through the resolver at run time.
    expect(template).toMatch(/set \$api_upstream http:\/\/api:8080;/);
    expect(template).toMatch(/proxy_pass \$api_upstream;/);

    const healthcheck = asRecord(service('api').healthcheck, 'api.healthcheck');
    const test = Array.isArray(healthcheck.test) ? healthcheck.test.map(String) : [String(healthcheck.test)];
    expect(['CMD', 'CMD-SHELL']).toContain(test[0]);
    expect(test.join(' ')).toMatch(/:8080\/readyz\b/);
  });

  it("writes each CMD health check's arguments without spaces: podman's Docker API splits them on spaces", () => {
    const spaced = Object.keys(services).flatMap((name) => {
      const test = isRecord(service(name).healthcheck) ? (service(name).healthcheck as Record<string, unknown>).test : undefined;
      if (!Array.isArray(test) || test[0] !== 'CMD') return [];
      return test.slice(1).map(String).filter((arg) => /\s/.test(arg)).map((arg) => `${name}: ${arg}`);
    });
    expect(spaced).toEqual([]);
  });

  it('starts the api and the worker only after postgres is healthy and the namespace exists', () => {
    for (const role of APP_ROLES) {
      expect(dependenciesOf(role), role).toMatchObject({
        postgres: 'service_healthy',
        'temporal-create-namespace': 'service_completed_successfully',
      });
    }
  });

  it('only depends on services that exist', () => {
    const dangling = Object.keys(services).flatMap((name) =>
      Object.keys(dependenciesOf(name))
        .filter((target) => !(target in services))
        .map((target) => `${name} -> ${target}`),
    );
    expect(dangling).toEqual([]);
  });

  it('declares every named volume it mounts', () => {
    const undeclared = Object.keys(services).flatMap((name) =>
      ((service(name).volumes ?? []) as unknown[])
        .map((volume) => (isRecord(volume) ? String(volume.source ?? '') : String(volume).split(':')[0] ?? ''))
        .filter((source) => /^[A-Za-z0-9][\w.-]*$/.test(source) && !(source in topLevelVolumes))
        .map((source) => `${name}: ${source}`),
    );
    expect(undeclared).toEqual([]);
  });

  it('documents in docs/configuration.md every variable of the app environment', () => {
    const readme = readFileSync(configurationDocUrl, 'utf8');
    const variables = new Set<string>();
    for (const role of APP_ROLES) {
      for (const [key, value] of Object.entries(environmentOf(role))) {
        variables.add(key);
        for (const name of interpolatedVariables(value)) variables.add(name);
      }
    }
    const undocumented = [...variables].filter((name) => !new RegExp(`\\b${name}\\b`).test(readme));
    expect(undocumented).toEqual([]);
  });
});

describe('docker-compose.yml: the observability profile', () => {
  const MONITORING: readonly string[] = ['prometheus', 'grafana'];
  const prometheusDir = new URL('deploy/observability/prometheus/', repoRootUrl);
  const prometheusConfig = asRecord(parse(readFileSync(new URL('prometheus.yml', prometheusDir), 'utf8')), 'prometheus.yml');
  const scrapeJobs = (prometheusConfig.scrape_configs as Record<string, unknown>[]).map((job) => asRecord(job, 'scrape config'));
  const scrapeJob = (name: string) => {
    const job = scrapeJobs.find((candidate) => candidate.job_name === name);
    if (!job) throw new Error(`prometheus.yml has no job ${name}`);
    return job;
  };

  it('adds Prometheus and Grafana only under the `observability` profile: a plain `up` starts what it did before', () => {
    for (const name of MONITORING) expect(service(name).profiles, name).toEqual(['observability']);
    const profiled = Object.keys(services).filter((name) => service(name).profiles !== undefined);
    expect(profiled.sort()).toEqual([...MONITORING].sort());
    const waitingForMonitoring = Object.keys(services)
      .filter((name) => !MONITORING.includes(name))
      .flatMap((name) => Object.keys(dependenciesOf(name)).filter((target) => MONITORING.includes(target)));
    expect(waitingForMonitoring).toEqual([]);
  });

  it('runs the Prometheus release that promtool is built from (scripts/promtool.mjs), and a Grafana release', () => {
    expect(imageOf('prometheus')).toBe(`prom/prometheus:${PROMETHEUS_VERSION}`);
    expect(imageOf('grafana')).toMatch(/^grafana\/grafana:\d+\.\d+\.\d+$/);
  });

  it('loads deploy/observability/prometheus (the config promtool checks, and the rules it names) and keeps its data on a named volume', () => {
    const configDir = mountOf('prometheus', './deploy/observability/prometheus');
    expect(configDir).toBe('/etc/prometheus');
    expect(commandArgv('prometheus')).toEqual(expect.arrayContaining([`--config.file=${configDir}/prometheus.yml`, '--storage.tsdb.path=/prometheus']));
    const ruleFiles = (prometheusConfig.rule_files as string[]).map(String);
    expect(ruleFiles).toEqual(['alerts.yml']);
    for (const file of ruleFiles) expect(readdirSync(prometheusDir)).toContain(file);
    const dataVolume = ((service('prometheus').volumes ?? []) as unknown[]).map(String).find((volume) => volume.endsWith(':/prometheus'));
    expect(Object.keys(topLevelVolumes)).toContain(dataVolume?.split(':')[0]);
  });

  it("finds every replica of the api and the worker by DNS on the compose network, at the port each serves /metrics on", () => {
    for (const role of APP_ROLES) {
      const [discovery] = scrapeJob(`webhooks-${role}`).dns_sd_configs as Record<string, unknown>[];
      expect(discovery, role).toMatchObject({ names: [role], type: 'A' });
      const metricsPort = environmentOf(role).METRICS_PORT ?? '9464';
      expect(String(discovery?.port), role).toBe(metricsPort);
      expect(((service(role).expose ?? []) as unknown[]).map(String), role).toContain(metricsPort);
      expect(replicasOf(role), role).toBeGreaterThan(1);
    }
    const temporalEndpoint = environmentOf('temporal').PROMETHEUS_ENDPOINT?.split(':')[1];
    expect(scrapeJob('temporal').static_configs).toEqual([{ targets: [`temporal:${temporalEndpoint}`] }]);
  });

  it('selects in the alert rules only jobs that prometheus.yml scrapes', () => {
    const rules = readFileSync(new URL('alerts.yml', prometheusDir), 'utf8');
    const selected = [...rules.matchAll(/job=~?"([^"]+)"/g)].flatMap((match) => match[1]!.split('|'));
    expect(selected.length).toBeGreaterThan(0);
    expect(selected.filter((job) => !scrapeJobs.some((candidate) => candidate.job_name === job))).toEqual([]);
  });

  it('provisions Grafana with a Prometheus data source on the prometheus service and the dashboard files', () => {
    expect(mountOf('grafana', './deploy/observability/grafana/provisioning')).toBe('/etc/grafana/provisioning');
    const dashboardsDir = mountOf('grafana', './deploy/observability/grafana/dashboards');
    const provisioning = new URL('deploy/observability/grafana/provisioning/', repoRootUrl);
    const { datasources } = parse(readFileSync(new URL('datasources/prometheus.yml', provisioning), 'utf8')) as { datasources: Record<string, unknown>[] };
    expect(datasources).toHaveLength(1);
    expect(datasources[0]).toMatchObject({ type: 'prometheus', url: 'http://prometheus:9090' });
    const { providers } = parse(readFileSync(new URL('dashboards/webhooks.yml', provisioning), 'utf8')) as { providers: Record<string, unknown>[] };
    expect(providers.map((provider) => asRecord(provider.options, 'provider options').path)).toEqual([dashboardsDir]);
    expect(readdirSync(new URL('deploy/observability/grafana/dashboards/', repoRootUrl)).filter((file) => file.endsWith('.json'))).not.toEqual([]);
    expect(dependenciesOf('grafana')).toMatchObject({ prometheus: 'service_started' });
  });

  it('publishes Prometheus and Grafana on the loopback interface only', () => {
    expect(publishedPorts('prometheus')).toEqual([{ hostIp: '127.0.0.1', hostStart: 9090, hostEnd: 9090, target: 9090 }]);
    expect(publishedPorts('grafana')).toEqual([{ hostIp: '127.0.0.1', hostStart: 3000, hostEnd: 3000, target: 3000 }]);
  });
});

describe('Dockerfile', () => {
  const instructions = dockerfileInstructions(readFileSync(dockerfileUrl, 'utf8'));
  const indexOf = (predicate: (instruction: { keyword: string; args: string }) => boolean) =>
    instructions.findIndex(predicate);

  it('builds on the Active LTS line, node:26-bookworm-slim, and runs no transpiler in production', () => {
    const from = instructions.filter((instruction) => instruction.keyword === 'FROM');
    expect(from.at(-1)?.args).toMatch(/^node:26(\.\d+)*-bookworm-slim\b/);
    // Node 26 strips the types itself; tsx is only for development on older Node.
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    expect(Object.keys(manifest.dependencies)).not.toContain('tsx');
    expect(Object.keys(manifest.devDependencies)).toContain('tsx');
  });

  it('installs the production dependencies with npm ci from the copied lockfile', () => {
    const copyLockfile = indexOf((i) => i.keyword === 'COPY' && i.args.includes('package-lock.json'));
    const npmCi = indexOf((i) => i.keyword === 'RUN' && /\bnpm ci\b/.test(i.args));
    expect(copyLockfile).toBeGreaterThanOrEqual(0);
    expect(npmCi).toBeGreaterThan(copyLockfile);
    expect(instructions[npmCi]?.args).toContain('--omit=dev');
  });

  it('copies the sources the runtime needs and bundles the workflows at build time', () => {
    const copied = instructions
      .filter((instruction) => instruction.keyword === 'COPY')
      .map((instruction) => instruction.args)
      .join(' ');
    for (const path of ['src', 'workflows', 'activities', 'drizzle', 'scripts', 'tsconfig.json']) {
      expect(copied).toMatch(new RegExp(`(^|\\s)(\\./)?${path.replace('.', '\\.')}(/|\\s|$)`));
    }
    const lastSourceCopy = instructions.reduce(
      (last, instruction, index) => (instruction.keyword === 'COPY' && /\bworkflows\b/.test(instruction.args) ? index : last),
      -1,
    );
    const bundle = indexOf((i) => i.keyword === 'RUN' && i.args.includes('npm run build:workflows'));
    expect(bundle).toBeGreaterThan(lastSourceCopy);
  });

  it('listens on every interface of the container by default, and checks /readyz on PORT', () => {
    expect(instructions.some((i) => i.keyword === 'ENV' && /\bHOST=0\.0\.0\.0\b/.test(i.args))).toBe(true);
    const healthcheck = instructions.filter((instruction) => instruction.keyword === 'HEALTHCHECK').at(-1);
    expect(healthcheck?.args).toMatch(/\bCMD\b/);
    expect(healthcheck?.args).toContain("'http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz'");
    // podman's Docker API splits a check's arguments on spaces.
    expect(JSON.parse(healthcheck!.args.replace(/^.*?CMD\s+/s, ''))[2]).not.toMatch(/\s/);
  });

  it('installs the CLI as `webhooks`, the bin package.json declares, with its loader', () => {
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { bin: Record<string, string> };
    const bin = manifest.bin.webhooks!.replace(/^\.\//, '');
    const copied = instructions.filter((i) => i.keyword === 'COPY').map((i) => i.args.split(/\s+/)[0]!.replace(/^\.\//, ''));
    expect(copied).toContain(bin.split('/')[0]);
    expect(instructions.some((i) => i.keyword === 'RUN' && i.args.includes(`ln -s /app/${bin} /usr/local/bin/webhooks`))).toBe(true);
  });

  it('runs as a non-root user', () => {
    const users = instructions.filter((instruction) => instruction.keyword === 'USER');
    const user = users.at(-1)?.args.split(':')[0];
    expect(user).toBeDefined();
    expect(['root', '0']).not.toContain(user);
  });

  it('runs in production mode, exposes 8080 and starts the api by default', () => {
    expect(instructions.some((i) => i.keyword === 'ENV' && /\bNODE_ENV[= ]production\b/.test(i.args))).toBe(true);
    expect(instructions.some((i) => i.keyword === 'EXPOSE' && i.args.split(/\s+/).includes('8080'))).toBe(true);
    const cmd = instructions.filter((instruction) => instruction.keyword === 'CMD').at(-1);
    expect(JSON.parse(cmd?.args ?? 'null')).toEqual(['npm', 'run', 'api']);
  });
});

describe('.dockerignore', () => {
  it('keeps dependencies, local data, tools, git metadata, build output, tests and secrets out of the context', () => {
    const entries = readFileSync(dockerignoreUrl, 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    expect(entries).toEqual(
      expect.arrayContaining(['node_modules', '.data', '.tools', '.git', 'dist', 'test', 'bench/results', '.env']),
    );
  });
});
