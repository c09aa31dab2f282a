import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';

/** A key and self-signed certificate for loopback addresses and localhost, as PEM, and their files. */
export interface LocalCertificate {
  key: string;
  cert: string;
  certFile: string;
  keyFile: string;
}

/**
 * Makes (or reuses) a self-signed certificate for `addresses` (IP addresses or host names;
 * 127.0.0.1 by default) and localhost in `dir`, with the openssl command (Node has no API to
 * issue certificates).
 */
export function localCertificate(dir: string, validDays = 30, addresses: readonly string[] = ['127.0.0.1']): LocalCertificate {
  mkdirSync(dir, { recursive: true });
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  if (!existsSync(keyFile) || !existsSync(certFile)) {
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
  return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8'), certFile, keyFile };
}
