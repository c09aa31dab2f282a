/** An error the CLI prints as one line before exiting non-zero. */
export class CliError extends Error {
  override name = 'CliError';
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
