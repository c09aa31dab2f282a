import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, linkSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { PROMTOOL_MODULE } from '../../scripts/promtool.mjs';
import { ensureGoBinaries, projectRoot } from '../../src/local/go-tools.mjs';
import { TEMPORAL_SCHEMA_DIR, ensureTemporalTools } from '../../src/local/temporal-tools.mjs';
import { isProgram, runProgram } from './commands.ts';

/*
 * The images docker-compose.yml and the Dockerfile name, made on this machine, which reaches no
 * image registry: each from Debian's packages (mmdebstrap, apt) or from binaries the project
 * builds with Go, tagged with the very name the files use. They are never published. Each image
 * carries a label with a hash of its recipe and inputs, and is made again only when that changes.
 */

const RECIPES = path.join(import.meta.dirname, 'images');
const STAGING = path.join(projectRoot, '.tools', 'compose-images');
const KEY_LABEL = 'webhooks.local-image';
const DEBIAN = 'localhost/debian:bookworm';
const DEBIAN_PACKAGES = ['libatomic1', 'ca-certificates', 'libstdc++6'];
/** The machine's CA bundle: the package registries are reached through a proxy with its own CA. */
const HOST_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

/** Prometheus itself, from the module, version and build tags of promtool. */
const PROMETHEUS_MODULE = { ...PROMTOOL_MODULE, binaries: { prometheus: 'github.com/prometheus/prometheus/cmd/prometheus' } };

interface Recipe {
  /** The Containerfile in test/compose/images. */
  containerfile: string;
  /** What the build context holds: file or folder name -> where it comes from (built first if needed). */
  context: () => Record<string, string>;
}

let temporal: Record<string, string> | undefined;
const temporalBinaries = () => (temporal ??= ensureTemporalTools(['cli', 'server', 'ui']));
const recipeFile = (name: string) => ({ [name]: path.join(RECIPES, name) });

/** The recipe of each image docker-compose.yml names, by compose service. */
const SERVICE_RECIPES: Record<string, Recipe> = {
  postgres: { containerfile: 'postgres.Containerfile', context: () => recipeFile('postgres-entrypoint.sh') },
  temporal: { containerfile: 'temporal-server.Containerfile', context: () => ({ 'temporal-server': temporalBinaries()['temporal-server']! }) },
  'temporal-admin-tools': {
    containerfile: 'temporal-admin-tools.Containerfile',
    context: () => {
      const binaries = temporalBinaries();
      return { temporal: binaries.temporal!, 'temporal-sql-tool': binaries['temporal-sql-tool']!, schema: TEMPORAL_SCHEMA_DIR };
    },
  },
  'temporal-ui': { containerfile: 'temporal-ui.Containerfile', context: () => ({ 'temporal-ui-server': temporalBinaries()['temporal-ui-server']! }) },
  proxy: { containerfile: 'nginx.Containerfile', context: () => recipeFile('nginx-entrypoint.sh') },
  prometheus: { containerfile: 'prometheus.Containerfile', context: () => ({ prometheus: ensureGoBinaries([PROMETHEUS_MODULE]).prometheus! }) },
};

const run = (command: string, args: string[], env: NodeJS.ProcessEnv) =>
  execFileSync(command, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 });

function labelOf(tag: string, env: NodeJS.ProcessEnv): string | undefined {
  try {
    return run('podman', ['image', 'inspect', '--format', `{{index .Labels "${KEY_LABEL}"}}`, tag], env).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The newest version the npm registry has of `spec` (a package at a version range). */
function newestOnNpm(spec: string, env: NodeJS.ProcessEnv): string {
  const versions: string | string[] = JSON.parse(run('npm', ['view', spec, 'version', '--json'], env));
  return Array.isArray(versions) ? versions.at(-1)! : versions;
}

/** `npm pack` of `spec` unpacked into `into`; answers the package folder. */
function unpackFromNpm(spec: string, into: string, env: NodeJS.ProcessEnv): string {
  mkdirSync(into, { recursive: true });
  const file = run('npm', ['pack', '--silent', spec], { ...env, npm_config_cache: path.join(STAGING, 'npm-cache') }).trim().split('\n').at(-1)!;
  execFileSync('mv', [file, into]);
  execFileSync('tar', ['xzf', path.join(into, file), '-C', into]);
  return path.join(into, 'package');
}

const hash = (parts: string[]) => createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 16);

const isFolder = (source: string) => statSync(source).isDirectory();

/** A hash of a file, or of every file under a folder with its path. */
function contentHash(source: string): string {
  const h = createHash('sha256');
  const add = (file: string) => {
    if (isFolder(file)) for (const entry of readdirSync(file).sort()) add(path.join(file, entry));
    else h.update(path.relative(source, file)).update(readFileSync(file));
  };
  add(source);
  return h.digest('hex');
}

/** Builds `tag` from the Containerfile and a context of hard links (or copies) of the given sources. */
function build(tag: string, containerfile: string, context: Record<string, string>, key: string, env: NodeJS.ProcessEnv): void {
  const dir = mkdtempSync(path.join(STAGING, 'context-'));
  try {
    for (const [name, source] of Object.entries(context)) {
      if (isFolder(source)) cpSync(source, path.join(dir, name), { recursive: true });
      else linkOrCopy(source, path.join(dir, name));
    }
    console.error(`compose test: making ${tag} (${containerfile})`);
    run('podman', ['build', '--format', 'docker', '--label', `${KEY_LABEL}=${key}`, '-t', tag, '-f', path.join(RECIPES, containerfile), dir], env);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function linkOrCopy(source: string, target: string): void {
  try {
    linkSync(source, target);
  } catch {
    cpSync(source, target);
  }
}

/** localhost/debian:bookworm: a minimal Debian root file system made with mmdebstrap. */
function ensureDebian(env: NodeJS.ProcessEnv): string {
  const key = hash(['mmdebstrap --variant=minbase bookworm', ...DEBIAN_PACKAGES]);
  if (labelOf(DEBIAN, env) === key) return key;
  const rootfs = path.join(STAGING, 'debian-bookworm.tar');
  console.error(`compose test: making ${DEBIAN} (mmdebstrap)`);
  run('mmdebstrap', ['--quiet', '--variant=minbase', `--include=${DEBIAN_PACKAGES.join(',')}`, 'bookworm', rootfs], env);
  run('podman', ['import', '--change', `LABEL ${KEY_LABEL}=${key}`, rootfs, DEBIAN], env);
  rmSync(rootfs, { force: true });
  return key;
}

/** The Dockerfile's Node base image: Node and npm from the npm registry, on the Debian image. */
function ensureNode(tag: string, debianKey: string, env: NodeJS.ProcessEnv): void {
  const major = /:(\d+)-/.exec(tag)?.[1];
  if (!major) throw new Error(`the Dockerfile's base image ${tag} names no Node major version`);
  const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  const node = `node-linux-${arch}@${newestOnNpm(`node-linux-${arch}@${major}`, env)}`;
  const npm = `npm@${newestOnNpm('npm@11', env)}`;
  const key = hash([debianKey, readFileSync(path.join(RECIPES, 'node.Containerfile'), 'utf8'), node, npm, contentHash(HOST_CA_BUNDLE)]);
  if (labelOf(tag, env) === key) return;
  const packs = mkdtempSync(path.join(STAGING, 'npm-'));
  try {
    const nodePackage = unpackFromNpm(node, path.join(packs, 'node'), env);
    const npmPackage = unpackFromNpm(npm, path.join(packs, 'npm'), env);
    build(tag, 'node.Containerfile', { node: path.join(nodePackage, 'bin', 'node'), npm: npmPackage, 'host-ca-bundle.crt': HOST_CA_BUNDLE }, key, env);
  } finally {
    rmSync(packs, { recursive: true, force: true });
  }
}

/** An image name as Docker reads it: `postgres:15` is `docker.io/library/postgres:15`. */
function qualified(name: string): string {
  const [first, ...rest] = name.split('/');
  if (rest.length > 0 && (first!.includes('.') || first!.includes(':') || first === 'localhost')) return name;
  return rest.length === 0 ? `docker.io/library/${name}` : `docker.io/${name}`;
}

/** The image names of docker-compose.yml by service, and the Dockerfile's base image, qualified. */
function imagesNamed(): { services: Record<string, string>; dockerfileBase: string } {
  const compose = parse(readFileSync(path.join(projectRoot, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, { image?: string }> };
  const services = Object.fromEntries(Object.entries(compose.services).flatMap(([name, s]) => (s.image ? [[name, qualified(s.image)]] : [])));
  const dockerfileBase = /^FROM\s+(\S+)/m.exec(readFileSync(path.join(projectRoot, 'Dockerfile'), 'utf8'))?.[1];
  if (!dockerfileBase) throw new Error('the Dockerfile has no FROM line');
  return { services, dockerfileBase: qualified(dockerfileBase) };
}

/**
 * Makes every image docker-compose.yml and the Dockerfile name but `skip` (Grafana, which cannot
 * be made here), if missing or made from other inputs. Slow the first time (minutes: Debian root
 * file systems, Go builds); seconds once cached.
 */
function ensureLocalImages(env: NodeJS.ProcessEnv, skip: string[]): void {
  mkdirSync(STAGING, { recursive: true });
  const { services, dockerfileBase } = imagesNamed();
  const debianKey = ensureDebian(env);
  ensureNode(dockerfileBase, debianKey, env);
  const made = new Set<string>();
  for (const [service, image] of Object.entries(services)) {
    if (skip.includes(service) || made.has(image)) continue;
    const known = SERVICE_RECIPES[service] ?? recipeByImage(services, image);
    if (!known) throw new Error(`docker-compose.yml's service ${service} uses ${image}, which the compose test cannot make (test/compose/images)`);
    const context = known.context();
    const key = hash([
      debianKey,
      readFileSync(path.join(RECIPES, known.containerfile), 'utf8'),
      ...Object.entries(context).map(([name, source]) => `${name}:${contentHash(source)}`),
    ]);
    if (labelOf(image, env) !== key) build(image, known.containerfile, context, key, env);
    made.add(image);
  }
}

/** The recipe of an image another service also uses (temporal-create-namespace runs admin-tools). */
function recipeByImage(services: Record<string, string>, image: string): Recipe | undefined {
  const owner = Object.keys(SERVICE_RECIPES).find((service) => services[service] === image);
  return owner ? SERVICE_RECIPES[owner] : undefined;
}

/** The compose services whose images cannot be made here: Grafana's. */
const NOT_MADE_HERE = ['grafana'];

/**
 * {@link ensureLocalImages} of every image but {@link NOT_MADE_HERE}'s, in a process of its own:
 * minutes on a new machine (see `commands.ts`).
 */
export async function makeLocalImages(env: NodeJS.ProcessEnv): Promise<void> {
  await runProgram(import.meta.filename, NOT_MADE_HERE, env);
}

// Run as a program (by makeLocalImages): the services not to make are its arguments.
if (isProgram(import.meta.url)) ensureLocalImages(process.env, process.argv.slice(2));
