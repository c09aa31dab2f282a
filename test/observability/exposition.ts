/** Series names of a histogram or summary family besides the family's own name. */
const FAMILY_SERIES: Record<string, string[]> = {
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['_sum', '_count'],
};

/**
 * The metric names a Prometheus text exposition lets a query select: every sample's name, and
 * every family of a `# TYPE` line, also one with no sample yet (a labelled counter nobody has
 * incremented), with a histogram's `_bucket`, `_sum` and `_count`.
 */
export function exportedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE ([A-Za-z_:][A-Za-z0-9_:]*) (\w+)/.exec(line);
    if (type) {
      const [, family, kind] = type as unknown as [string, string, string];
      const suffixes = FAMILY_SERIES[kind];
      if (suffixes) for (const suffix of suffixes) names.add(`${family}${suffix}`);
      else names.add(family);
      continue;
    }
    const sample = /^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]/.exec(line);
    if (sample) names.add(sample[1]!);
  }
  return names;
}
