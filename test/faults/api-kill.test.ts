import { it } from 'vitest';
import { killApiWhilePublishing } from './api-kill.ts';
import { useScenario } from './scenario.ts';

const scenario = useScenario('api-kill');

it('delivers every 202 and, once, every unanswered event published again, when the API is killed mid-publish', async () => {
  await killApiWhilePublishing(scenario, 'API SIGKILL while publishing', {
    kill: () => scenario.cluster.api.kill(),
    repair: () => scenario.cluster.api.start(),
  });
});
