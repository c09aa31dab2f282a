#!/usr/bin/env node
// Finds or builds the pinned Temporal binaries (src/local/temporal-tools.mjs):
//   node scripts/temporal-tools.mjs            the CLI (`npm start` and `npm test` run this first)
//   node scripts/temporal-tools.mjs --cluster  also the server, temporal-sql-tool, the Web UI server
//                                              and the schemas (`npm run cluster -- up` runs this)
import { main } from '../src/local/temporal-tools.mjs';

main(process.argv.slice(2));
