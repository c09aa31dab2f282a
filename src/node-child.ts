/**
 * This process's node flags for a child process that runs one of the project's TypeScript
 * files: the same flags (profiling ones included), plus the TypeScript loader when this
 * process runs without it (under vitest, which transforms TypeScript itself).
 */
export function nodeArgsForChild(): string[] {
  const argv = process.execArgv;
  const hasTsx = argv.some((arg, i) => arg === '--import=tsx' || (arg === '--import' && argv[i + 1] === 'tsx'));
  return hasTsx ? argv : [...argv, '--import', 'tsx'];
}
