import { it } from 'vitest';
import { HEALTHY_HOST, NEIGHBOUR_TEST_TIMEOUT_MS, noisyNeighbour } from './noisy-neighbour.ts';
import { useScenario } from './scenario.ts';

const scenario = useScenario('noisy-neighbour-many-projects', {}, HEALTHY_HOST);

it('delivers every event of a healthy webhook at a steady rate while 30 other projects, one webhook each on one hanging endpoint, have 300 deliveries queued', async () => {
  await noisyNeighbour('noisy neighbour (30 projects, one hanging endpoint)', scenario, { projects: 30, webhooksPerProject: 1, events: 300 });
}, NEIGHBOUR_TEST_TIMEOUT_MS);
