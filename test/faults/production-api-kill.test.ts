import { it } from 'vitest';
import { killApiWhilePublishing } from './api-kill.ts';
import { useProductionScenario } from './scenario.ts';

const scenario = useProductionScenario('prod-api-kill');

it('production topology: delivers every 202 and, once, every unanswered event published again, when one of two API replicas is killed mid-publish', async () => {
  // The producer spreads its calls over both replicas and sends a retry to the other one.
  await killApiWhilePublishing(scenario, 'production: one of two API replicas SIGKILL while publishing', {
    kill: async () => {
      scenario.cluster.damaged('api', 0);
      await scenario.cluster.topology.kill('api', 0);
    },
    repair: () => scenario.cluster.repair(),
  });
});
