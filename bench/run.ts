/**
 * The delivery benchmark: `npm run bench -- [options]`. See `--help` and docs/performance.md.
 *
 * A system run (bench/system.ts) starts the service (embedded: PGlite + Temporal dev server; or
 * the DATABASE_URL / TEMPORAL_ADDRESS of its environment; or the production topology with
 * --cluster) and an HTTPS receiver in another process, publishes events at an offered rate,
 * waits for every delivery, and reports throughput, latency, memory and CPU per process.
 * `--ceiling` (bench/ceiling.ts) measures the send path alone; `--noisy-neighbour`
 * (bench/noisy-neighbour.ts) measures one project's latency beside a neighbour of
 * `--neighbour-scenario`: hanging endpoints, a publish flood, bulk retries.
 */
import { runCeiling } from './ceiling.ts';
import { cleanup, isInterrupted } from './lib/lifecycle.ts';
import { options } from './lib/options.ts';
import { runNoisyNeighbour } from './noisy-neighbour.ts';
import { runSystem } from './system.ts';

try {
  const outcome = options.ceiling ? await runCeiling() : options.neighbour ? await runNoisyNeighbour() : await runSystem();
  await cleanup();
  const failed = outcome.lost > 0 || outcome.invalid_signatures > 0;
  if (failed) console.error(`\n${outcome.lost} deliveries lost (or still queued at the deadline), ${outcome.invalid_signatures} invalid signatures`);
  process.exit(failed ? 3 : 0);
} catch (error) {
  if (!isInterrupted()) console.error(error instanceof Error ? error.stack ?? error.message : error);
  await cleanup();
  process.exit(1);
}
