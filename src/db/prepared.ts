import type { Database } from './client.ts';

/**
 * A statement of the delivery hot path, built once per database handle and then only executed
 * with new values (`sql.placeholder`s): building a Drizzle query costs more CPU than the
 * round trip it makes (docs/performance.md). Each handle gets its own prepared statement,
 * since a prepared query belongs to the session it was made on.
 */
export function preparedPerDatabase<Prepared>(build: (db: Database) => Prepared): (db: Database) => Prepared {
  const built = new WeakMap<Database, Prepared>();
  return (db) => {
    let prepared = built.get(db);
    if (prepared === undefined) {
      prepared = build(db);
      built.set(db, prepared);
    }
    return prepared;
  };
}
