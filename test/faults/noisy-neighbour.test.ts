import { it } from 'vitest';
import { HEALTHY_HOST, NEIGHBOUR_TEST_TIMEOUT_MS, noisyNeighbour } from './noisy-neighbour.ts';
import { useScenario } from './scenario.ts';

const scenario = useScenario('noisy-neighbour', {}, HEALTHY_HOST);

it("delivers every event of a healthy webhook at a steady rate while another project's endpoint hangs with 200 deliveries queued", async () => {
  await noisyNeighbour('noisy neighbour (hanging endpoint)', scenario, { projects: 1, webhooksPerProject: 1, events: 200 });
}, NEIGHBOUR_TEST_TIMEOUT_MS);
