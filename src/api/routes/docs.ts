import { Hono } from 'hono';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { AppEnv } from '../env.ts';
import { ApiError } from '../errors.ts';

/** Where `swagger-ui-dist` (the maintained Swagger UI build) is installed. */
const SWAGGER_UI_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The Swagger UI files the page loads, served from the project's own dependency: the page works offline. */
const ASSETS = new Map([
  ['swagger-ui.css', 'text/css; charset=utf-8'],
  ['swagger-ui-bundle.js', 'text/javascript; charset=utf-8'],
]);

/** Each asset read once, on first request. */
const loaded = new Map<string, Promise<Buffer>>();
function asset(name: string): Promise<Buffer> {
  let file = loaded.get(name);
  if (!file) {
    file = readFile(path.join(SWAGGER_UI_DIR, name));
    loaded.set(name, file);
  }
  return file;
}

/**
 * The API reference: Swagger UI on the service's OpenAPI document, with "Try it out" against the
 * service that served it (Authorize takes the API token). No request leaves for another origin:
 * the assets come from `swagger-ui-dist`, the validator badge is off, and the start-up code is a
 * script of ours rather than inline.
 */
export function docsRouter(openApiPath: string) {
  const initScript = `window.ui = SwaggerUIBundle(${JSON.stringify({
    url: openApiPath,
    dom_id: '#swagger-ui',
    deepLinking: true,
    tryItOutEnabled: true,
    validatorUrl: null,
    persistAuthorization: false,
  })});\n`;
  const page = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Webhooks API v2 reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<noscript>This page needs JavaScript; the raw document is at <a href="${openApiPath}">${openApiPath}</a>.</noscript>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/init.js"></script>
</body></html>`;

  return new Hono<AppEnv>()
    .get('/', (c) => c.html(page))
    .get('/assets/init.js', (c) => c.body(initScript, 200, { 'Content-Type': 'text/javascript; charset=utf-8' }))
    .get('/assets/:file', async (c) => {
      const name = c.req.param('file');
      const type = ASSETS.get(name);
      if (!type) throw new ApiError('not_found', `no reference page asset ${name}`);
      return c.body(new Uint8Array(await asset(name)), 200, { 'Content-Type': type, 'Cache-Control': 'public, max-age=86400' });
    });
}
