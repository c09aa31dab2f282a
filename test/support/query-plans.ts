/** The rows each scan of `table` read in an EXPLAIN ANALYZE plan (those it returned and those its filter removed), summed. */
export function rowsReadFrom(plan: Record<string, unknown>, table: string): number {
  const own = plan['Relation Name'] === table ? Number(plan['Actual Rows'] ?? 0) * Number(plan['Actual Loops'] ?? 1) + Number(plan['Rows Removed by Filter'] ?? 0) : 0;
  const children = (plan['Plans'] as Record<string, unknown>[] | undefined) ?? [];
  return own + children.reduce((sum, child) => sum + rowsReadFrom(child, table), 0);
}
