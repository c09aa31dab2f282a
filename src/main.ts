import { ConfigError, loadConfig } from './config.ts';
import { createLogger } from './logger.ts';
import { startService, type Role } from './runtime.ts';

const ROLES: readonly Role[] = ['all', 'api', 'worker', 'migrate'];
const role = (process.argv[2] ?? 'all') as Role;
if (!ROLES.includes(role)) {
  console.error(`unknown role "${role}"; use one of: ${ROLES.join(', ')}`);
  process.exit(2);
}

let config;
try {
  config = loadConfig();
} catch (error) {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
}
const logger = createLogger(config.logLevel, { role });

try {
  const service = await startService(config, role, logger);
  if (role === 'migrate') process.exit(0);

  let stopping: Promise<void> | undefined;
  const shutdown = (reason: string, code: number) => {
    stopping ??= (async () => {
      logger.info({ reason }, 'shutting down');
      await service.stop();
      logger.info('stopped');
      process.exit(code);
    })();
    return stopping;
  };
  process.on('SIGINT', () => void shutdown('SIGINT', 0));
  process.on('SIGTERM', () => void shutdown('SIGTERM', 0));
  service.workerDone?.catch((error: unknown) => {
    logger.fatal({ err: error }, 'worker failed');
    void shutdown('worker failed', 1);
  });

  if (role === 'all') {
    const banner = [
      '',
      'Webhook delivery service is running.',
      `  API:              ${service.apiUrl}/api-gateway/v2  (reference: ${service.apiUrl}/docs)`,
      `  Health:           ${service.apiUrl}/readyz`,
      `  Metrics:          ${service.metricsUrl}  (for your Prometheus, on this machine)`,
      `  Temporal:         ${service.temporalAddress}${service.temporalUiUrl ? `  (Web UI: ${service.temporalUiUrl})` : ''}`,
      '',
      'Create a first API key (in another terminal):',
      '  npm run cli -- keys create --project my-project --services webhooks',
      "Then open that project's customer portal with the link this prints:",
      '  npm run cli -- portal link --project my-project',
      'Press Ctrl-C to stop.',
      '',
    ];
    process.stderr.write(banner.join('\n'));
  }
} catch (error) {
  if (error instanceof ConfigError) console.error(error.message);
  else logger.fatal({ err: error }, 'start-up failed');
  process.exit(1);
}
