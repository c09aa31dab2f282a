import type { RequestListener } from 'node:http';
import { createServer } from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { verifyWebhook, WebhookVerificationError } from '../receiver/index.ts';
import { answer, cliClient, keyIdOfToken } from './api-client.ts';
import { localCertificate } from './certificate.ts';
import { CliError, UsageError, type Command } from './output.ts';

const USAGE = `usage: listen [--port 4443] [--secret <whsec_…>] [--create-webhook [--keep]] [--status <code>] [--cert-dir <dir>] [--json]
       listen --init [--cert-dir <dir>]
  Runs a local HTTPS receiver (self-signed certificate) and prints every delivery it gets,
  with its signature verified when the secret is known. --create-webhook registers a webhook
  pointing here (needs --token or WEBHOOKS_API_TOKEN) and deletes it on exit unless --keep.
  --init only makes the certificate and prints the command that starts the service trusting it.`;

/** `listen`: watch deliveries arrive on your own computer, like `stripe listen`. */
export const listenCommand: Command = { usage: USAGE, actions: [], run: listen };

/**
 * The command that starts the service so that it delivers to this receiver: it must trust the
 * certificate and allow a loopback target. The path is relative when it can be, so that it is
 * the one the README shows.
 */
function startCommand(certFile: string): string {
  const relative = path.relative(process.cwd(), certFile);
  const shown = relative.startsWith('..') || path.isAbsolute(relative) ? certFile : relative;
  return `DELIVERY_ALLOW_PRIVATE_TARGETS=true DELIVERY_CA_FILE=${shown} npm start`;
}

/**
 * The listener's request handler: answers `status`, then prints the request (its signature
 * checked with `secret()` when there is one), as JSON lines with `json`.
 */
function printRequest(options: { status: number; json: boolean; secret: () => string | undefined; print: (line: unknown) => void }): RequestListener {
  const { status, json, print } = options;
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      res.writeHead(status, { 'Content-Type': 'text/plain' }).end(status < 300 ? 'ok' : 'failing on purpose');
      const rawBody = Buffer.concat(chunks);
      const secret = options.secret();
      let signature = 'unchecked (no --secret)';
      let body: unknown;
      try {
        body = JSON.parse(rawBody.toString('utf8'));
      } catch {
        body = rawBody.toString('utf8');
      }
      if (secret) {
        try {
          verifyWebhook({ rawBody, headers: req.headers, secret });
          signature = 'verified';
        } catch (error) {
          signature = error instanceof WebhookVerificationError ? `FAILED: ${error.code}` : `FAILED: ${String(error)}`;
        }
      }
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => name !== 'connection'));
      if (json) {
        print({ received_at: new Date().toISOString(), delivery_id: req.headers['x-service-delivery-id'], event: req.headers['x-service-event'], signature, answered: status, headers, body });
      } else {
        print(`\n${new Date().toISOString()}  ${req.method} ${req.url}  ${req.headers['x-service-event'] ?? ''}  ${req.headers['x-service-delivery-id'] ?? ''}  → ${status}`);
        print(`  signature: ${signature}`);
        for (const [name, value] of Object.entries(headers)) print(`  ${name}: ${String(value)}`);
        print(JSON.stringify(body, null, 2).replace(/^/gm, '  '));
      }
    });
  };
}

async function listen(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      init: { type: 'boolean', default: false },
      port: { type: 'string', default: '4443' },
      secret: { type: 'string' },
      'create-webhook': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      status: { type: 'string', default: '200' },
      json: { type: 'boolean', default: false },
      token: { type: 'string' },
      'api-url': { type: 'string' },
      'cert-dir': { type: 'string' },
    },
  });
  const port = Number(values.port);
  const status = Number(values.status);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be a port number\n${USAGE}`);
  if (!Number.isInteger(status) || status < 200 || status > 599) throw new UsageError('--status must be an HTTP status (200-599)');

  // A webhook to register needs a usable token: checked before anything starts.
  let registration: { api: ReturnType<typeof cliClient>; apiKeyId: string } | undefined;
  if (values['create-webhook'] && !values.init) {
    const token = values.token ?? config.cli.apiToken;
    const apiKeyId = token && keyIdOfToken(token);
    if (!apiKeyId) throw new UsageError('--create-webhook needs an API token that names its key (sk_<id>_…): --token or WEBHOOKS_API_TOKEN');
    registration = { api: cliClient(values['api-url'] ?? config.cli.apiUrl, token), apiKeyId };
  }

  const certificate = localCertificate(values['cert-dir'] ?? path.join(config.dataDir, 'listen'));
  if (certificate.renewed) {
    console.error(`The certificate in ${certificate.certFile} had expired (or was about to): made a new one. Restart the service so that it trusts it.`);
  }
  if (values.init) {
    console.log(
      values.json
        ? JSON.stringify({ certificate: certificate.certFile, start: startCommand(certificate.certFile) })
        : `Certificate ${certificate.certFile}.\nStart the service trusting it with:\n  ${startCommand(certificate.certFile)}`,
    );
    return;
  }
  let secret = values.secret;
  const print = (line: unknown) => console.log(values.json ? JSON.stringify(line) : line);

  const server = createServer({ key: certificate.key, cert: certificate.cert }, printRequest({ status, json: values.json, secret: () => secret, print }));
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) => reject(new CliError(`cannot listen on 127.0.0.1:${port}: ${error.message}`)));
    server.listen(port, '127.0.0.1', resolve);
  });
  const address = server.address();
  const url = `https://127.0.0.1:${typeof address === 'object' && address ? address.port : port}/`;
  // Listened for before anything is printed: a signal sent as soon as a line names the webhook
  // (or while it is being created) still stops the listener and deletes it. Ctrl-C under `npm run`
  // signals this process twice (the terminal, then npm): the handler stays, so that the second
  // signal does not kill it before the webhook is deleted.
  const stopped = new Promise<void>((resolve) => {
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      server.closeAllConnections();
      server.close(() => resolve());
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });

  let cleanup = async () => {};
  if (registration) {
    const { api, apiKeyId } = registration;
    const created = await answer(api.POST('/api-gateway/v2/webhooks', { body: { api_key_id: apiKeyId, url, events: ['docauth.completed'] } })).catch(
      (error: unknown) => {
        server.close();
        throw error;
      },
    );
    secret = created.data.secret;
    print(values.json ? { webhook_id: created.data.id, url } : `Created webhook ${created.data.id} → ${url}`);
    if (!values.keep) {
      cleanup = async () => {
        // Left behind, it would collect dead letters and count against the project's webhooks: say so.
        await answer(api.DELETE('/api-gateway/v2/webhooks/{id}', { params: { path: { id: created.data.id } } })).catch((error: unknown) => {
          throw new CliError(`could not delete webhook ${created.data.id} (${(error as Error).message}); delete it with: npm run cli -- webhooks delete ${created.data.id}`);
        });
      };
    }
  }
  print(
    values.json
      ? { listening: url, certificate: certificate.certFile }
      : `Listening on ${url} (certificate ${certificate.certFile}).\n` +
          `The service must trust it and allow a loopback target: start it with\n  ${startCommand(certificate.certFile)}\nCtrl-C to stop.`,
  );

  await stopped;
  await cleanup();
}
