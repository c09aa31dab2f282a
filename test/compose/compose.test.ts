import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { localCertificate, type LocalCertificate } from '../../src/cli/certificate.ts';
import { expectValidSignature } from '../delivery/support.ts';
import { docauthData } from '../support/event-data.ts';
import { call } from '../support/http.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { readmeCommands, runToEnd } from '../support/readme.ts';
import { waitFor } from '../support/wait.ts';
import { docker, missingCommands, podman, startContainerEngine, type ContainerEngine } from './engine.ts';
import { makeLocalImages } from './images.ts';

/*
 * The README's Docker Compose path, run for real: the images docker-compose.yml names are made on
 * this machine (test/compose/images.ts), the README's compose commands run as written, then a
 * delivery is followed end to end, a worker container is killed, and Prometheus scrapes every
 * replica. Grafana is left out: its image cannot be made here.
 */

const projectRoot = path.resolve(import.meta.dirname, '..', '..');
const PROJECT = 'webhooks-compose-test';
const API = 'http://127.0.0.1:8080';
/** The name under which the containers reach the host (podman: the compose network's gateway). */
const HOST_FROM_CONTAINERS = 'host.containers.internal';

let engine: ContainerEngine;
let env: NodeJS.ProcessEnv;
let caDir: string;
let certDir: string;
/** The receiver's certificate, for the name the containers call the host by. */
let certificate: LocalCertificate;
let receiver: HttpsReceiver | undefined;
/** What the README's commands printed, in order. */
const printed: string[] = [];
let webhooksToken: string;
let failed = false;
/** The webhook of the receiver, and its signing secret. */
let webhook: { id: string; secret: string };
let producerKey: string;

const compose = (args: string[]) => docker(env, ['compose', ...args], projectRoot);

async function api(method: string, route: string, token: string, body?: unknown): Promise<{ status: number; body: any }> {
  const answer = await call(`${API}${route}`, { method, token, body });
  if (typeof answer === 'string') throw new Error(`${method} ${route}: no answer (${answer})`);
  return answer;
}

/**
 * Publishes one event of project acme with the producer key, as docs/usage.md tells a producer
 * to: over the quota (429) it waits and publishes the same `id` again, and so it does after a 5xx
 * ("safe to retry with backoff"), at most 10 times, each retry logged. Answers the delivery ids.
 */
async function publish(id: string): Promise<string[]> {
  const body = { id, project_id: 'acme', event: 'docauth.completed', data: docauthData() };
  let published = await api('POST', '/internal/v1/events', producerKey, body);
  for (let failures = 0; published.status === 429 || (published.status >= 500 && failures < 10); ) {
    if (published.status >= 500) {
      failures += 1;
      console.error(`compose test: publishing ${id} answered ${published.status} ${JSON.stringify(published.body)}; again in 2 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, published.status === 429 ? 1_000 : 2_000));
    published = await api('POST', '/internal/v1/events', producerKey, body);
  }
  expect(published.status, JSON.stringify(published.body)).toBe(202);
  return published.body.data.delivery_ids;
}

async function waitUntilDelivered(deliveryIds: string[], timeoutMs = 120_000): Promise<void> {
  const pending = new Set(deliveryIds);
  await waitFor(
    `${deliveryIds.length} deliveries to be delivered`,
    async () => {
      for (const id of [...pending]) {
        const { body } = await api('GET', `/api-gateway/v2/webhooks/${webhook.id}/deliveries/${id}`, webhooksToken);
        if (body?.data?.status === 'delivered') pending.delete(id);
      }
      return pending.size === 0;
    },
    { timeoutMs, intervalMs: 1_000 },
  );
}

/** One CLI command in a one-off api container, as the README runs `keys create`. */
function cli(args: string[]): Promise<string> {
  return compose(['run', '--rm', '--no-deps', 'api', 'npm', 'run', '-s', 'cli', '--', ...args]);
}

beforeAll(async () => {
  const missing = missingCommands();
  if (missing.length > 0) throw new Error(`the compose test needs: ${missing.join('; ')}`);
  engine = await startContainerEngine();
  const started = Date.now();
  await makeLocalImages(engine.env);
  console.error(`compose test: images ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  // The receiver's certificate names the host as the containers call it; the workers trust it.
  certDir = mkdtempSync(path.join(os.tmpdir(), 'compose-receiver-'));
  certificate = localCertificate(certDir, 1, [HOST_FROM_CONTAINERS]);
  caDir = mkdtempSync(path.join(os.tmpdir(), 'compose-receiver-ca-'));
  copyFileSync(certificate.certFile, path.join(caDir, 'cert.pem'));
  chmodSync(caDir, 0o755);
  chmodSync(path.join(caDir, 'cert.pem'), 0o644);
  env = {
    ...engine.env,
    COMPOSE_PROJECT_NAME: PROJECT,
    COMPOSE_FILE: ['docker-compose.yml', path.join('test', 'compose', 'receiver.override.yml')].join(':'),
    RECEIVER_CA_DIR: caDir,
  };
  // What a previous run may have left (its containers, volumes and network).
  await compose(['--profile', 'observability', 'down', '--volumes', '--remove-orphans', '--timeout', '5']);
}, 1_800_000);

afterEach(({ task }) => {
  if (task.result?.state === 'fail') failed = true;
});

afterAll(async () => {
  if (env) {
    try {
      if (failed) {
        console.error(await compose(['--profile', 'observability', 'ps', '--all']));
        // This project's containers only; an empty list would make `podman inspect` fail before the logs.
        const ids = (await compose(['--profile', 'observability', 'ps', '--all', '--quiet'])).split('\n').filter(Boolean);
        const format = '{{.Name}} restarts={{.RestartCount}} started={{.State.StartedAt}} {{.State.Status}} exit={{.State.ExitCode}}';
        if (ids.length > 0) console.error(await podman(env, ['inspect', '--format', format, ...ids]));
        console.error(await compose(['--profile', 'observability', 'logs', '--no-color', '--timestamps', '--tail', '150']));
      }
    } catch (error) {
      console.error(`compose logs failed: ${String(error)}`);
    }
    try {
      await compose(['--profile', 'observability', 'down', '--volumes', '--remove-orphans', '--timeout', '5']);
    } catch (error) {
      console.error(`compose down failed: ${String(error)}`);
    }
  }
  await receiver?.close();
  await engine?.stop();
  for (const dir of [certDir, caDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.sequential("the README's Docker Compose path", () => {
  it('starts from the README commands as written and makes the first key', async () => {
    const commands = await readmeCommands('### With Docker Compose');
    expect(commands.some((command) => /^docker compose up\b/.test(command))).toBe(true);
    for (const command of commands) {
      const started = Date.now();
      const result = await runToEnd(command, env, projectRoot, 1_200_000);
      console.error(`compose test: \`${command}\` took ${((Date.now() - started) / 1000).toFixed(1)} s`);
      printed.push(result.stdout);
      env = result.env;
    }
    const token = /^ {2}(sk_\S+)$/m.exec(printed.join('\n'))?.[1];
    expect(token, `the README's keys create printed no token:\n${printed.join('\n')}`).toBeDefined();
    webhooksToken = token!;
    await waitFor('the API to be ready', async () => (await fetch(`${API}/readyz`).catch(() => undefined))?.ok, { timeoutMs: 120_000 });
    const webhooks = await api('GET', '/api-gateway/v2/webhooks', webhooksToken);
    expect(webhooks.status).toBe(200);
    expect(webhooks.body.data).toEqual([]);
  });

  it('delivers an event published with a producer key to a receiver, with a verified signature', async () => {
    const gateway = (await podman(env, ['network', 'inspect', `${PROJECT}_default`, '--format', '{{range .Subnets}}{{.Gateway}}{{end}}'])).trim();
    expect(gateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    receiver = await startHttpsReceiver({ host: gateway, certificate });
    const url = receiver.url.replace(gateway, HOST_FROM_CONTAINERS);
    const keyId = /Created API key (key_\S+) /.exec(printed.join('\n'))?.[1];
    const created = await api('POST', '/api-gateway/v2/webhooks', webhooksToken, { api_key_id: keyId, url, events: ['docauth.completed'] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    webhook = { id: created.body.data.id, secret: created.body.data.secret };

    producerKey = JSON.parse((await cli(['keys', 'create', '--project', 'acme', '--services', 'events', '--json'])).trim().split('\n').at(-1)!).token as string;
    const [deliveryId] = await publish('compose-first');

    const [request] = await receiver.waitForRequests(1, 120_000);
    expect(request!.headers['x-service-delivery-id']).toBe(deliveryId);
    expectValidSignature(request!, webhook.secret);
    await waitUntilDelivered([deliveryId!]);
  });

  it('loses nothing when a worker container is killed with deliveries in flight', async () => {
    const EVENTS = 30;
    // The worker to kill is one the sends went to: the endpoint has 10 places, so only 10 sends
    // start before the first times out, and Temporal may hand every one to the same replica.
    const workers = await Promise.all(
      [1, 2].map(async (replica) => {
        const name = `${PROJECT}-worker-${replica}`;
        const address = (await podman(env, ['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', name])).trim();
        return { name, address };
      }),
    );
    const before = receiver!.requests.length;
    receiver!.behave(() => 'hang');
    const deliveryIds: string[] = [];
    for (let i = 0; i < EVENTS; i += 1) deliveryIds.push(...(await publish(`compose-kill-${i}`)));
    const sentBy = (address: string) => receiver!.requests.slice(before).filter((request) => request.remoteAddress === address);
    const { name: killed, address: killedAddress } = await waitFor(
      `a request of ${workers.map(({ name, address }) => `${name} (${address})`).join(' or ')} in flight`,
      () => workers.find(({ address }) => sentBy(address).length > 0),
      { timeoutMs: 120_000 },
    );
    const sentByKilled = () => sentBy(killedAddress);
    await docker(env, ['kill', killed], projectRoot);
    const killedAt = Date.now();
    const cutOff = sentByKilled().map((request) => String(request.headers['x-service-delivery-id']));
    receiver!.behave(() => ({ status: 200 }));
    receiver!.answerHanging(200);

    await waitUntilDelivered(deliveryIds, 300_000);
    const received = receiver!.requests.slice(before);
    expect(new Set(received.map((request) => request.headers['x-service-delivery-id']))).toEqual(new Set(deliveryIds));
    // What the killed worker had in flight was sent again after the kill.
    for (const id of cutOff) {
      expect(received.some((request) => request.headers['x-service-delivery-id'] === id && request.receivedAt > killedAt), id).toBe(true);
    }
    for (const request of received) expectValidSignature(request, webhook.secret);
    console.error(`compose test: ${cutOff.length} deliveries in flight in the killed worker; all ${EVENTS} delivered`);

    // Back to two worker replicas for the scrape below, whether or not the engine restarted it.
    if ((await docker(env, ['inspect', '--format', '{{.State.Running}}', killed], projectRoot)).trim() !== 'true') await docker(env, ['start', killed], projectRoot);
  });

  it('scrapes every api and worker replica with Prometheus, in the observability profile (without Grafana)', async () => {
    await compose(['--profile', 'observability', 'up', '-d', 'prometheus']);
    const upByJob = await waitFor(
      'Prometheus to scrape two api replicas, two worker replicas and the Temporal server',
      async () => {
        const response = await fetch('http://127.0.0.1:9090/api/v1/targets?state=active').catch(() => undefined);
        if (!response?.ok) return undefined;
        const targets = ((await response.json()) as { data: { activeTargets: { labels: { job: string }; health: string }[] } }).data.activeTargets;
        const up: Record<string, number> = {};
        for (const target of targets) if (target.health === 'up') up[target.labels.job] = (up[target.labels.job] ?? 0) + 1;
        return up['webhooks-api'] === 2 && up['webhooks-worker'] === 2 && up.temporal === 1 ? up : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 2_000 },
    );
    expect(upByJob).toMatchObject({ 'webhooks-api': 2, 'webhooks-worker': 2, temporal: 1 });
  });
});
