import { prepareRelease, previousRelease } from '../support/releases.ts';

/**
 * Installs the previous release once (`npm ci` into .tools/releases, kept across runs) before the
 * upgrade files start, two at a time: each then finds it made ({@link preparedReleaseDir}).
 */
export default async function setup() {
  await prepareRelease(previousRelease());
}
