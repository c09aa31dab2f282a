/** Durations as operators write them in variables and options: `90s`, `15m`, `12h`, `30d`. */

const UNITS_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Milliseconds of a duration like `30d`, or undefined when the text is not one. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  if (!match) return undefined;
  const ms = Number(match[1]) * UNITS_MS[match[2] as keyof typeof UNITS_MS];
  return Number.isSafeInteger(ms) ? ms : undefined;
}

/** The largest whole unit that writes `ms` exactly: 2592000000 -> `30d`. */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (ms >= UNITS_MS[unit] && ms % UNITS_MS[unit] === 0) return `${ms / UNITS_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}
