/**
 * The self-signed certificate of the bench's and the fault suite's receivers. It names both
 * loopback addresses they bind (127.0.0.1 for a neighbour's endpoint, 127.0.0.2 for the healthy
 * customer's, so that the service sees two destination hosts) and localhost; receivers that
 * share its files are all trusted through one DELIVERY_CA_FILE.
 */
import { localCertificate, type LocalCertificate } from '../../src/cli/certificate.ts';

/** The loopback addresses a receiver may bind (Linux answers on all of 127.0.0.0/8). */
export const LOOPBACK_HOSTS = ['127.0.0.1', '127.0.0.2'] as const;
export type LoopbackHost = (typeof LOOPBACK_HOSTS)[number];

/** Makes (or reuses) the key and certificate in `dir`, for every {@link LOOPBACK_HOSTS} address and localhost. */
export function loopbackCertificate(dir: string, validDays: number): LocalCertificate {
  return localCertificate(dir, validDays, LOOPBACK_HOSTS);
}
