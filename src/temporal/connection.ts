/**
 * How every part of the service connects to the configured Temporal: the API, the worker, the
 * CLI, `npm run cluster` and the tests build their connections here, from TEMPORAL_ADDRESS,
 * TEMPORAL_TLS* and TEMPORAL_API_KEY (src/config.ts).
 */
import type { TLSConfig } from '@temporalio/client';
import tls from 'node:tls';
import { ConfigError, type Config, type TemporalTls } from '../config.ts';

/** What both `Connection.connect` (client) and `NativeConnection.connect` (worker) take. */
export interface TemporalConnectionOptions {
  address: string;
  /** Absent: plaintext. */
  tls?: TLSConfig;
  apiKey?: string;
}

/** The part of the configuration a connection needs. */
export type TemporalConnectionSettings = Pick<Config['temporal'], 'tls' | 'apiKey'>;

/** The connection options for `address` (the configured TEMPORAL_ADDRESS, or the dev server's address). */
export function temporalConnectionOptions(address: string, settings: TemporalConnectionSettings): TemporalConnectionOptions {
  const { tls: configured, apiKey } = settings;
  return {
    address,
    ...(configured && {
      tls: {
        ...(configured.serverCaCertificate && { serverRootCACertificate: configured.serverCaCertificate }),
        ...(configured.serverName && { serverNameOverride: configured.serverName }),
        ...(configured.client && { clientCertPair: { crt: configured.client.certificate, key: configured.client.key } }),
      },
    }),
    ...(apiKey && { apiKey }),
  };
}

/**
 * Connects with `connect` (`Connection.connect` or `NativeConnection.connect`, with any options of
 * its own added) to `address`. When that fails over a TLS handshake, the error is a
 * {@link ConfigError} saying which side refused the other and which variables to check; the SDK's
 * own errors do not tell (the client's says only that no connection came before the deadline).
 */
export async function connectToTemporal<T>(
  address: string,
  settings: TemporalConnectionSettings,
  connect: (options: TemporalConnectionOptions) => Promise<T>,
): Promise<T> {
  try {
    return await connect(temporalConnectionOptions(address, settings));
  } catch (error) {
    const explanation = await explainHandshake(address, settings.tls);
    if (explanation) throw new ConfigError(`cannot connect to Temporal at ${address} (TEMPORAL_ADDRESS): ${explanation}`, { cause: error });
    throw error;
  }
}

/** Server alerts (OpenSSL error codes) that mean: the server refused the client's certificate, or its absence. */
const CLIENT_CERTIFICATE_REFUSED = /^ERR_SSL_(TLSV13_ALERT_CERTIFICATE_REQUIRED|SSLV3_ALERT_BAD_CERTIFICATE|TLSV1_ALERT_UNKNOWN_CA|SSLV3_ALERT_CERTIFICATE_(EXPIRED|REVOKED|UNKNOWN|UNSUPPORTED)|TLSV1_ALERT_ACCESS_DENIED|TLSV1_ALERT_DECRYPT_ERROR)$/;

/** Errors of a TLS client whose server answers in plaintext (or hangs up on its hello). */
const NOT_TLS = new Set(['ECONNRESET', 'ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG']);

type HandshakeOutcome = { ok: true } | { ok: false; code: string; message: string };

/**
 * Completes a TLS handshake with the server as the connection would (same CA, client certificate
 * and server name), then sends the HTTP/2 preface: a server that refuses the client certificate
 * says so only after the handshake, in TLS 1.3.
 */
function tryHandshake(address: string, configured: TemporalTls | undefined): Promise<HandshakeOutcome> {
  const { hostname, port } = new URL(`tcp://${address}`);
  const host = hostname.replace(/^\[(.*)\]$/, '$1');
  return new Promise((resolve) => {
    const socket = tls.connect({
      host,
      port: Number(port),
      ALPNProtocols: ['h2'],
      ...(configured?.serverName && { servername: configured.serverName }),
      ...(configured?.serverCaCertificate && { ca: configured.serverCaCertificate }),
      ...(configured?.client && { cert: configured.client.certificate, key: configured.client.key }),
      // Without TLS configured, the question is only whether the server speaks TLS.
      rejectUnauthorized: configured !== undefined,
    });
    const settle = (outcome: HandshakeOutcome) => {
      socket.destroy();
      resolve(outcome);
    };
    socket.setTimeout(5_000, () => settle({ ok: false, code: 'ETIMEDOUT', message: 'no answer within 5 s' }));
    let secured = false;
    socket.once('secureConnect', () => {
      secured = true;
      // The HTTP/2 client preface and an empty SETTINGS frame: a server that accepts the client answers with its SETTINGS.
      socket.write(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0', 'latin1'));
    });
    socket.once('data', () => settle({ ok: true }));
    // OpenSSL's `reason` ("tlsv13 alert certificate required") without the rest of its message.
    socket.once('error', (error: NodeJS.ErrnoException & { reason?: string }) => settle({ ok: false, code: error.code ?? '', message: error.reason ?? error.message }));
    socket.once('close', () => settle(secured ? { ok: true } : { ok: false, code: 'ECONNRESET', message: 'the server closed the connection' }));
  });
}

/** Why a connection to `address` fails in its TLS handshake, naming the variables to check; undefined when it is not that. */
async function explainHandshake(address: string, configured: TemporalTls | undefined): Promise<string | undefined> {
  const outcome = await tryHandshake(address, configured);
  if (!configured) {
    const speaksTls = outcome.ok || (outcome.code.startsWith('ERR_SSL_') && !NOT_TLS.has(outcome.code));
    return speaksTls
      ? 'the server requires TLS: set TEMPORAL_TLS=true, with TEMPORAL_TLS_SERVER_CA_CERT_PATH when a CA of your own signed its certificate, and TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH when it requires mutual TLS'
      : undefined;
  }
  if (outcome.ok) return undefined;
  const { code, message } = outcome;
  if (CLIENT_CERTIFICATE_REFUSED.test(code)) {
    return configured.client
      ? `the server refused this service's client certificate (${message}): check TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (a certificate signed by a CA the server trusts for clients, for client authentication, not expired)`
      : `the server requires a client certificate (${message}): set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH`;
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return `the server's certificate is not for the name this service checks (${message}): check TEMPORAL_TLS_SERVER_NAME (unset: the host of TEMPORAL_ADDRESS)`;
  }
  if (/CERT|ISSUER|SELF_SIGNED|SIGNATURE/.test(code) && !code.startsWith('ERR_SSL_')) {
    return `this service does not trust the server's certificate (${message}): check TEMPORAL_TLS_SERVER_CA_CERT_PATH (the CA that signed the server's certificate; unset: the system's CAs)`;
  }
  if (NOT_TLS.has(code)) {
    return `the server does not speak TLS there (${message}): check TEMPORAL_ADDRESS, or unset TEMPORAL_TLS and the TEMPORAL_TLS_* variables`;
  }
  return undefined;
}
