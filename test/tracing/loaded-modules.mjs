// Preloaded into a service started by the tracing tests (`node --import`): when the process
// exits, writes the files of every CommonJS module it loaded (the OpenTelemetry packages are
// CommonJS, also when imported from ES modules) to the file named by LOADED_MODULES_FILE.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const file = process.env.LOADED_MODULES_FILE;
if (file) process.on('exit', () => writeFileSync(file, JSON.stringify(Object.keys(require.cache))));
