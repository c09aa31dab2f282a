import { it } from 'vitest';
import { HEALTHY_HOST, NEIGHBOUR_TEST_TIMEOUT_MS, noisyNeighbour } from './noisy-neighbour.ts';
import { useScenario } from './scenario.ts';

const scenario = useScenario('noisy-neighbour-many-webhooks', {}, HEALTHY_HOST);

it("delivers every event of a healthy webhook at a steady rate while another project's 30 webhooks on one hanging endpoint have 300 deliveries queued", async () => {
  await noisyNeighbour('noisy neighbour (30 webhooks of one project, one hanging endpoint)', scenario, { projects: 1, webhooksPerProject: 30, events: 10 });
}, NEIGHBOUR_TEST_TIMEOUT_MS);
