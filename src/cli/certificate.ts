import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';

/** A key and self-signed certificate for loopback addresses and localhost, as PEM, and their files. */
export interface LocalCertificate {
  key: string;
  cert: string;
  certFile: string;
  keyFile: string;
  renewed: boolean;
}

/** A certificate that expires sooner than this is made anew. */
const RENEW_WITHIN_MS = 3_600_000;

/** True when the certificate in `certFile` is there and valid for another hour after `now`. */
function stillValid(certFile: string, now: number): boolean {
  if (!existsSync(certFile)) return false;
  try {
    return Date.parse(new X509Certificate(readFileSync(certFile)).validTo) - now > RENEW_WITHIN_MS;
  } catch {
    return false;
  }
}

/**
 * Makes (or reuses, while it is valid for another hour) a self-signed certificate for
 * `addresses` (IP addresses or host names; 127.0.0.1 by default) and localhost in `dir`, with the
 * openssl command (Node has no API to issue certificates). `renewed` says it replaced one that
 * had expired or was about to: whoever trusted the old one must read the new one.
 */
export function localCertificate(dir: string, validDays = 30, addresses: readonly string[] = ['127.0.0.1'], now = Date.now()): LocalCertificate {
  mkdirSync(dir, { recursive: true });
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  const valid = stillValid(certFile, now);
  const renewed = existsSync(certFile) && !valid;
  if (!existsSync(keyFile) || !valid) {
    execFileSync(
      'openssl',
      [
        'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
        '-keyout', keyFile, '-out', certFile, '-days', String(validDays), '-subj', '/CN=localhost',
        '-addext', `subjectAltName=${[...addresses.map((address) => `${isIP(address) ? 'IP' : 'DNS'}:${address}`), 'DNS:localhost'].join(',')}`,
      ],
      { stdio: 'ignore' },
    );
  }
  return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8'), certFile, keyFile, renewed };
}
