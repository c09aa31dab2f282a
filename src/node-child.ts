import { fileURLToPath } from 'node:url';

/** The module that loads the project's TypeScript in a Node process (scripts/typescript.mjs). */
const TYPESCRIPT_LOADER = fileURLToPath(new URL('../scripts/typescript.mjs', import.meta.url));

/**
 * This process's node flags for a child process that runs one of the project's TypeScript
 * files: the same flags (profiling ones included), plus the TypeScript loader when this
 * process runs without it (under vitest, which transforms TypeScript itself).
 */
export function nodeArgsForChild(): string[] {
  const argv = process.execArgv;
  const loads = (arg: string | undefined) => arg !== undefined && /(^|[/=])(tsx|scripts\/typescript\.mjs)$/.test(arg);
  const hasLoader = argv.some((arg, i) => (arg.startsWith('--import=') && loads(arg)) || (arg === '--import' && loads(argv[i + 1])));
  return hasLoader ? argv : [...argv, '--import', TYPESCRIPT_LOADER];
}
