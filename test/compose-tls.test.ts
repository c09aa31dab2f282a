/*
 * Static checks of deploy/temporal/compose-tls.yml, the override that turns on mutual TLS on the
 * Temporal frontend of docker-compose.yml: parsed, no container engine needed. The same files
 * run with TLS in the production topology's suite (CLUSTER_TLS=true npm run test:cluster).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const read = (file: string) => readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
type Service = { environment?: Record<string, string>; volumes?: string[]; command?: string[] };
const servicesOf = (file: string) => (parse(read(file), { merge: true }) as { services: Record<string, Service> }).services;

const compose = servicesOf('docker-compose.yml');
const override = servicesOf('deploy/temporal/compose-tls.yml');
const serverTemplate = read('deploy/temporal/server/production.yaml');
const uiTemplate = read('deploy/temporal/ui/production.yaml');
const CLIENT_VARIABLES = ['TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH', 'TEMPORAL_TLS_SERVER_NAME'];

/**
 * The services of docker-compose.yml that call the Temporal frontend: those given its address, and
 * the namespace bootstrap (which resolves it itself); `migrate` only migrates the database.
 */
const clientsOfTemporal = Object.entries(compose)
  .filter(([name, service]) => name !== 'migrate' && (service.environment?.TEMPORAL_ADDRESS === 'temporal:7233' || (service.command ?? []).some((line) => line.includes('bootstrap.sh namespace'))))
  .map(([name]) => name);

const templateReads = (template: string, variable: string) => template.includes(`env "${variable}"`);

describe('deploy/temporal/compose-tls.yml', () => {
  it('overrides only services of docker-compose.yml: the server and every client of its frontend', () => {
    expect(clientsOfTemporal.sort()).toEqual(['api', 'temporal-create-namespace', 'temporal-ui', 'worker']);
    expect(Object.keys(override).sort()).toEqual(['temporal', ...clientsOfTemporal].sort());
  });

  it('gives every client the client certificate in the variables the service, the Temporal CLI and the UI read', () => {
    for (const name of clientsOfTemporal) expect(Object.keys(override[name]!.environment ?? {}).sort(), name).toEqual([...CLIENT_VARIABLES].sort());
    for (const variable of CLIENT_VARIABLES) expect(templateReads(uiTemplate, variable), `ui/production.yaml reads ${variable}`).toBe(true);
  });

  it('turns on mutual TLS in the server with variables its config file reads', () => {
    const variables = Object.keys(override.temporal!.environment ?? {});
    expect(variables).toContain('TEMPORAL_TLS_FRONTEND_CERT');
    for (const variable of variables) expect(templateReads(serverTemplate, variable), `server/production.yaml reads ${variable}`).toBe(true);
    // Mutual TLS unless told otherwise.
    expect(serverTemplate).toContain('requireClientAuth: {{ default "true" (env "TEMPORAL_TLS_REQUIRE_CLIENT_AUTH") }}');
  });

  it('mounts the certificates folder, read-only, wherever a variable names a file in it', () => {
    for (const [name, service] of Object.entries(override)) {
      // source:target:mode, the source possibly a ${VARIABLE:?message} with colons of its own.
      const mounts = (service.volumes ?? []).map((volume) => /^(\$\{[^}]*\}|[^:]+):([^:]+)(?::(\w+))?$/.exec(volume)?.slice(1) ?? []);
      const files = Object.entries(service.environment ?? {}).filter(([variable]) => variable !== 'TEMPORAL_TLS_SERVER_NAME');
      expect(files.length, name).toBeGreaterThan(0);
      for (const [variable, file] of files) {
        const mount = mounts.find(([, target]) => file.startsWith(`${target}/`));
        expect(mount, `${name} ${variable}=${file}`).toBeDefined();
        expect(mount![0], name).toMatch(/^\$\{TEMPORAL_CERTS_DIR:\?/);
        expect(mount![2], name).toBe('ro');
      }
    }
  });
});
