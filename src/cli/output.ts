import type { Config } from '../config.ts';

/** An error the CLI prints as one line before exiting 1: the command was right, running it failed. */
export class CliError extends Error {
  override name = 'CliError';
}

/** A command line the CLI cannot run as written (missing or invalid argument): exits 2. */
export class UsageError extends CliError {
  override name = 'UsageError';
}

/** Prints rows as an aligned table. */
export function printTable(rows: Record<string, unknown>[], columns: string[]): void {
  if (rows.length === 0) {
    console.log('(none)');
    return;
  }
  const cell = (value: unknown) => (value === undefined || value === null ? '' : Array.isArray(value) ? value.join(',') : String(value));
  const widths = columns.map((column) => Math.max(column.length, ...rows.map((row) => cell(row[column]).length)));
  const line = (values: string[]) => values.map((value, i) => value.padEnd(widths[i]!)).join('  ').trimEnd();
  console.log(line(columns.map((column) => column.toUpperCase())));
  for (const row of rows) console.log(line(columns.map((column) => cell(row[column]))));
}

/** A top-level CLI command (`keys`, `webhooks`, `listen`…). */
export interface Command {
  /** Printed on stdout by `--help` and `-h`, and on stderr after a usage error. */
  usage: string;
  /** The subcommands it takes as its first argument; empty when it takes none. */
  actions: readonly string[];
  /** Runs it with its arguments, the subcommand first. */
  run(config: Config, args: string[]): Promise<void>;
}
