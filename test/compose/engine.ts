import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureGoBinaries, onPath } from '../../src/local/go-tools.mjs';
import { waitFor } from '../support/wait.ts';
import { isProgram, output, runProgram } from './commands.ts';

/*
 * The container engine of the compose test: podman with its Docker-compatible API on a socket of
 * the test's own, the Docker CLI talking to it (DOCKER_HOST), and Compose v2, built with Go, as the
 * CLI's `compose` plugin (DOCKER_CONFIG). So `docker compose …` runs as a user types it.
 */

/** Docker Compose v2, the last line whose dependencies the Go module proxy here serves in full. */
const COMPOSE_VERSION = 'v2.40.3';
/**
 * Compose's Go module. Its go.mod has `exclude` directives, which `go install pkg@version`
 * refuses: built in a module of its own instead.
 */
export const COMPOSE_MODULE = {
  module: 'github.com/docker/compose/v2',
  version: COMPOSE_VERSION,
  binaries: { 'docker-compose': 'github.com/docker/compose/v2/cmd' },
  // What `docker compose version` prints.
  ldflags: `-s -w -X github.com/docker/compose/v2/internal.Version=${COMPOSE_VERSION}`,
  inScratchModule: true,
};

/** podman's settings for this machine (its cgroups and open-files limit). */
export const CONTAINERS_CONF = path.join(import.meta.dirname, 'images', 'containers.conf');

/** How often a container's health check runs while it is starting or unhealthy. */
const STARTING_HEALTH_CHECK_MS = 2_000;
/** ...and once it is healthy: docker-compose.yml's shortest interval (postgres and temporal). */
const HEALTHY_HEALTH_CHECK_MS = 5_000;

export interface ContainerEngine {
  /** The environment in which `docker` and `docker compose` reach the engine. */
  env: NodeJS.ProcessEnv;
  stop(): Promise<void>;
}

/** The commands the test needs, with what provides each on Debian. */
export function missingCommands(): string[] {
  const needed: Record<string, string> = {
    podman: 'apt-get install podman runc uidmap slirp4netns fuse-overlayfs',
    mmdebstrap: 'apt-get install mmdebstrap',
    docker: 'the Docker CLI (apt-get install docker.io provides one)',
  };
  return Object.entries(needed).flatMap(([command, how]) => (onPath(command) ? [] : [`${command}: ${how}`]));
}

/** Builds the Compose plugin with Go in a process of its own (minutes on a new machine, see `commands.ts`); answers its path. */
export async function buildComposePlugin(): Promise<string> {
  return (await runProgram(import.meta.filename, [])).trim().split('\n').at(-1)!;
}

/** The environment in which podman runs on this machine. */
export const podmanEnv = (): NodeJS.ProcessEnv => ({ ...process.env, CONTAINERS_CONF });

/**
 * Starts podman's API service and the health checks' runner. podman schedules health checks with
 * systemd timers; where systemd does not run (these machines), nothing runs them and a container
 * stays `starting` for ever, so compose's `condition: service_healthy` would wait for ever. The
 * runner does what the timers do: `podman healthcheck run` of each container with a check, every
 * 2 s while it is starting or unhealthy, every 5 s once it is healthy.
 */
export async function startContainerEngine(): Promise<ContainerEngine> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'compose-engine-'));
  const dockerConfig = path.join(dir, 'docker-config');
  mkdirSync(path.join(dockerConfig, 'cli-plugins'), { recursive: true });
  const composePlugin = await buildComposePlugin();
  symlinkSync(composePlugin, path.join(dockerConfig, 'cli-plugins', 'docker-compose'));
  const socket = path.join(dir, 'podman.sock');
  const env: NodeJS.ProcessEnv = {
    ...podmanEnv(),
    DOCKER_HOST: `unix://${socket}`,
    DOCKER_CONFIG: dockerConfig,
    // The classic builder through the engine's API: podman has no BuildKit.
    DOCKER_BUILDKIT: '0',
    COMPOSE_BAKE: 'false',
  };
  const service = spawn('podman', ['system', 'service', '--time=0', `unix://${socket}`], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let serviceErrors = '';
  service.stderr!.on('data', (chunk: Buffer) => (serviceErrors = (serviceErrors + chunk.toString()).slice(-4_000)));
  await waitFor('podman system service to answer', async () => {
    if (service.exitCode !== null) throw new Error(`podman system service exited: ${serviceErrors}`);
    await docker(env, ['version']);
    return true;
  }, { timeoutMs: 30_000 });
  const healthChecks = runHealthChecks(env);
  return {
    env,
    async stop() {
      await healthChecks.stop();
      await stopProcess(service);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function runHealthChecks(env: NodeJS.ProcessEnv): { stop(): Promise<void> } {
  const lastRun = new Map<string, number>();
  let stopped = false;
  const tick = async () => {
    const stdout = await podman(env, ['ps', '--format', '{{.ID}} {{.Status}}']).catch(() => '');
    const checks = stdout.split('\n').flatMap((line) => {
      const [id, ...status] = line.split(' ');
      const health = /\((healthy|unhealthy|starting)\)/.exec(status.join(' '))?.[1];
      if (!id || !health) return [];
      const due = health === 'healthy' ? HEALTHY_HEALTH_CHECK_MS : STARTING_HEALTH_CHECK_MS;
      return Date.now() - (lastRun.get(id) ?? 0) >= due ? [id] : [];
    });
    await Promise.all(
      checks.map(async (id) => {
        lastRun.set(id, Date.now());
        await podman(env, ['healthcheck', 'run', id]).catch(() => {});
      }),
    );
  };
  const loop = async () => {
    while (!stopped) {
      await tick();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  };
  const running = loop();
  return {
    stop: () => {
      stopped = true;
      return running;
    },
  };
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

/** `docker` in `env` (the engine's, with whatever the test adds) and `cwd`; answers what it printed. */
export const docker = (env: NodeJS.ProcessEnv, args: string[], cwd?: string): Promise<string> => output('docker', args, { env, cwd });

/** `podman` in `env`; answers what it printed. */
export const podman = (env: NodeJS.ProcessEnv, args: string[]): Promise<string> => output('podman', args, { env });

// Run as a program (by startContainerEngine): builds the Compose plugin and prints its path.
if (isProgram(import.meta.url)) console.log(ensureGoBinaries([COMPOSE_MODULE])['docker-compose']);
