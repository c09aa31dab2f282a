import { buildComposePlugin, podmanEnv } from './engine.ts';
import { makeLocalImages } from './images.ts';

/*
 * Makes what the compose test builds before it starts: the Compose plugin (Go) and the images
 * docker-compose.yml names. `.ci/run` runs this in the background while the first suites run;
 * the compose test then finds both made (each is cached by what it is made from).
 */
const started = Date.now();
console.error(`compose plugin: ${await buildComposePlugin()}`);
await makeLocalImages(podmanEnv());
console.error(`compose images ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
