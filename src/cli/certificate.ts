import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** A key and self-signed certificate for 127.0.0.1 and localhost, as PEM, and the certificate's file. */
export interface LocalCertificate {
  key: string;
  cert: string;
  certFile: string;
}

/**
 * Makes (or reuses) a self-signed certificate for 127.0.0.1 and localhost in `dir`, with
 * the openssl command (Node has no API to issue certificates).
 */
export function localCertificate(dir: string, validDays = 30): LocalCertificate {
  mkdirSync(dir, { recursive: true });
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  if (!existsSync(keyFile) || !existsSync(certFile)) {
    execFileSync(
      'openssl',
      [
        'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
        '-keyout', keyFile, '-out', certFile, '-days', String(validDays), '-subj', '/CN=localhost',
        '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
      ],
      { stdio: 'ignore' },
    );
  }
  return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8'), certFile };
}
