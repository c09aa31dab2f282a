/**
 * Loads the project's TypeScript files (`node --import ./scripts/typescript.mjs <file>.ts`).
 * Node strips the types itself where it can (24, 26: `process.features.typescript`), so
 * production runs no transpiler; every file uses erasable syntax only (tsconfig's
 * `erasableSyntaxOnly` checks it). Older Node (20) registers tsx, a dev dependency, instead.
 */
if (!process.features.typescript) await import('tsx');
