import type postgres from 'postgres';

/** Bytes on disk of each table (heap, TOAST, indexes) and per delivery, its attempts and its share of the event included. */
export async function measureStorage(raw: postgres.Sql) {
  const tables = await raw<{ name: string; rows: number; heap_bytes: number; index_bytes: number; total_bytes: number }[]>`
    select c.relname as name, (select reltuples::bigint from pg_class where oid = c.oid)::float8 as rows,
           pg_table_size(c.oid)::float8 as heap_bytes, pg_indexes_size(c.oid)::float8 as index_bytes,
           pg_total_relation_size(c.oid)::float8 as total_bytes
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind = 'r' and c.relname in ('events', 'deliveries', 'delivery_attempts', 'webhooks', 'api_keys')
    order by c.relname`;
  const indexes = await raw<{ name: string; table: string; bytes: number }[]>`
    select i.relname as name, t.relname as table, pg_relation_size(i.oid)::float8 as bytes
    from pg_index x join pg_class i on i.oid = x.indexrelid join pg_class t on t.oid = x.indrelid
    join pg_namespace n on n.oid = t.relnamespace
    where n.nspname = 'public' order by bytes desc`;
  const [exact] = await raw<{ deliveries: number }[]>`select count(*)::int as deliveries from deliveries`;
  const growing = tables.filter((table) => ['events', 'deliveries', 'delivery_attempts'].includes(table.name));
  const total = growing.reduce((sum, table) => sum + table.total_bytes, 0);
  return {
    deliveries: exact!.deliveries,
    bytes_per_delivery: Math.round(total / Math.max(1, exact!.deliveries)),
    total_mb: Math.round(total / 1_048_576),
    tables: tables.map((table) => ({ ...table, rows: Math.round(table.rows) })),
    indexes,
  };
}
