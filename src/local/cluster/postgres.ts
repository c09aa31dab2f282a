/**
 * The topology's PostgreSQL: Debian's server binaries (installed with apt-get where missing),
 * a data folder in DATA_DIR/cluster/postgres, the settings of deploy/postgres/production.conf
 * (the file docker-compose.yml gives its postgres too), and three databases: `temporal` and
 * `temporal_visibility` owned by the role `temporal`, `webhooks` owned by the role `webhooks`.
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { DEPLOY_DIR, type ClusterLayout } from './layout.ts';
import { isRunning, processStartTime, type ProcessRecord } from './processes.ts';

const run = promisify(execFile);
const DEBIAN_POSTGRES_ROOT = '/usr/lib/postgresql';
/** The tuning both topologies run with. */
export const POSTGRES_SETTINGS_FILE = path.join(DEPLOY_DIR, 'postgres', 'production.conf');
const asRoot = process.getuid?.() === 0;

/** Passwords of the two roles, generated on the first `up` (DATA_DIR/cluster/credentials.json, mode 0600). */
export interface Credentials {
  temporal: string;
  webhooks: string;
}

/** The folder of the newest Debian PostgreSQL server binaries, if any are installed. */
export function newestBinDir(): string | undefined {
  const majors = existsSync(DEBIAN_POSTGRES_ROOT)
    ? readdirSync(DEBIAN_POSTGRES_ROOT).filter((name) => /^\d+$/.test(name) && existsSync(path.join(DEBIAN_POSTGRES_ROOT, name, 'bin', 'postgres')))
    : [];
  if (majors.length === 0) return undefined;
  return path.join(DEBIAN_POSTGRES_ROOT, String(Math.max(...majors.map(Number))), 'bin');
}

/** The folder of Debian's PostgreSQL server binaries, installing the `postgresql` package when there is none. */
export async function ensurePostgresInstalled(log: (line: string) => void): Promise<string> {
  const found = newestBinDir();
  if (found) return found;
  log(`PostgreSQL server binaries not found under ${DEBIAN_POSTGRES_ROOT}: installing Debian's postgresql package…`);
  const aptGet = (...args: string[]) =>
    asRoot
      ? run('apt-get', args, { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
      : run('sudo', ['-n', 'env', 'DEBIAN_FRONTEND=noninteractive', 'apt-get', ...args]);
  try {
    await aptGet('update', '-q');
    await aptGet('install', '-y', '-q', 'postgresql');
  } catch (error) {
    throw new Error(
      `cannot install PostgreSQL (${(error as Error).message.split('\n')[0]}); install it yourself with ` +
        '`sudo apt-get install postgresql` (Debian/Ubuntu) and run this again',
    );
  }
  const installed = newestBinDir();
  if (!installed) throw new Error(`apt-get installed postgresql, yet no server binaries are under ${DEBIAN_POSTGRES_ROOT}`);
  return installed;
}

/** Runs a PostgreSQL binary, as the `postgres` OS user when this process is root (PostgreSQL refuses root). */
async function pgRun(binDir: string, binary: string, args: string[]): Promise<void> {
  const file = path.join(binDir, binary);
  const [command, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args];
  await run(command, argv, { timeout: 120_000 });
}

function chownToPostgres(...paths: string[]): void {
  if (!asRoot) return;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  for (const file of paths) chownSync(file, uid, gid);
}

/** Fails clearly when the `postgres` OS user cannot reach the data folder (for example DATA_DIR under /root). */
function assertReachableByPostgres(dir: string): void {
  if (!asRoot) return;
  try {
    execFileSync('runuser', ['-u', 'postgres', '--', 'test', '-x', dir]);
  } catch {
    throw new Error(
      `PostgreSQL runs as the OS user postgres, which cannot enter ${dir}: choose a DATA_DIR whose parent folders it can traverse (not under /root)`,
    );
  }
}

/** The running postmaster of the data folder, if there is one. */
export function runningPostgres(layout: ClusterLayout): ProcessRecord | undefined {
  const pidFile = path.join(layout.postgres.dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  const startTime = pid > 0 ? processStartTime(pid) : undefined;
  if (startTime === undefined) return undefined;
  const record = { role: 'postgres', index: 0, pid, startTime };
  return isRunning(record) ? record : undefined;
}

/**
 * Creates the data folder on first use, writes the settings and starts the server; resolves
 * once it accepts connections.
 */
export async function startPostgres(layout: ClusterLayout, binDir: string, logFile: string): Promise<ProcessRecord> {
  const { dataDir, socketDir, port } = layout.postgres;
  const parent = path.dirname(dataDir);
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    mkdirSync(socketDir, { recursive: true, mode: 0o700 });
    chownToPostgres(parent, socketDir);
    assertReachableByPostgres(parent);
    await pgRun(binDir, 'initdb', ['-D', dataDir, '-U', 'postgres', '-E', 'UTF8', '--locale=C.UTF-8', '--auth-local=trust', '--auth-host=scram-sha-256']);
    writeFileSync(path.join(dataDir, 'postgresql.conf'), `${readFileSync(path.join(dataDir, 'postgresql.conf'), 'utf8')}\ninclude_dir = 'conf.d'\n`);
  }
  const confDir = path.join(dataDir, 'conf.d');
  mkdirSync(confDir, { recursive: true });
  // Refreshed at every start: the settings file of the repository is what runs.
  copyFileSync(POSTGRES_SETTINGS_FILE, path.join(confDir, '10-production.conf'));
  writeFileSync(
    path.join(confDir, '20-this-machine.conf'),
    [
      '# Written by `npm run cluster -- up` at every start.',
      "listen_addresses = '127.0.0.1'",
      `port = ${port}`,
      `unix_socket_directories = '${socketDir}'`,
      '',
    ].join('\n'),
  );
  chownToPostgres(confDir, ...readdirSync(confDir).map((file) => path.join(confDir, file)));
  mkdirSync(path.dirname(logFile), { recursive: true });
  if (asRoot && !existsSync(logFile)) writeFileSync(logFile, '');
  chownToPostgres(logFile);
  await pgRun(binDir, 'pg_ctl', ['-D', dataDir, '-l', logFile, '-w', '-t', '60', 'start']);
  const record = runningPostgres(layout);
  if (!record) throw new Error(`PostgreSQL did not start; see ${logFile}`);
  return record;
}

/** `pg_ctl stop -m fast`: sessions are ended, a checkpoint is written. */
export async function stopPostgres(layout: ClusterLayout, binDir: string): Promise<void> {
  if (!runningPostgres(layout)) return;
  await pgRun(binDir, 'pg_ctl', ['-D', layout.postgres.dataDir, '-m', 'fast', '-w', '-t', '60', 'stop']);
}

/** The roles' passwords: read from the credentials file, made on first use. */
export function loadCredentials(layout: ClusterLayout): Credentials {
  if (existsSync(layout.credentialsFile)) return JSON.parse(readFileSync(layout.credentialsFile, 'utf8')) as Credentials;
  const credentials = { temporal: randomBytes(18).toString('base64url'), webhooks: randomBytes(18).toString('base64url') };
  mkdirSync(layout.root, { recursive: true });
  writeFileSync(layout.credentialsFile, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  return credentials;
}

/** Creates the roles and the service's database if missing (Temporal's databases are the bootstrap's). */
export async function ensureRolesAndDatabases(layout: ClusterLayout, credentials: Credentials): Promise<void> {
  const admin = postgres({
    host: layout.postgres.socketDir,
    port: layout.postgres.port,
    user: 'postgres',
    database: 'postgres',
    max: 1,
    onnotice: () => {},
  });
  try {
    // CREATEDB: temporal-sql-tool creates Temporal's two databases itself, as in compose.
    for (const [role, options] of [['temporal', 'LOGIN CREATEDB'], ['webhooks', 'LOGIN']] as const) {
      const [existing] = await admin`select 1 from pg_roles where rolname = ${role}`;
      const password = credentials[role];
      // Role names are constants; the password is sent as a literal the server quotes.
      const literal = `'${password.replaceAll("'", "''")}'`;
      await admin.unsafe(`${existing ? 'ALTER' : 'CREATE'} ROLE ${role} ${options} PASSWORD ${literal}`);
    }
    const [database] = await admin`select 1 from pg_database where datname = 'webhooks'`;
    if (!database) await admin.unsafe('CREATE DATABASE webhooks OWNER webhooks');
  } finally {
    await admin.end({ timeout: 5 });
  }
}

/** The URL of the service's database, as replicas and the admin CLI use it. */
export function webhooksDatabaseUrl(layout: ClusterLayout, credentials: Credentials): string {
  return `postgres://webhooks:${encodeURIComponent(credentials.webhooks)}@127.0.0.1:${layout.postgres.port}/webhooks`;
}
