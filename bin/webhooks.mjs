#!/usr/bin/env node
// The installed `webhooks` command. Node 22.18 and later strip the TypeScript types themselves;
// only older Node loads tsx (a dev dependency), as the npm scripts do.
await import('../scripts/typescript.mjs');
await import('../src/cli/index.ts');
