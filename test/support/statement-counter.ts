/** The keyword a statement seen on the wire (a database's `onStatement`) starts with, lower-cased: `begin`, `select`, `with`, … */
export function statementKeyword(text: string): string | undefined {
  return /^\s*(\w+)/.exec(text)?.[1]?.toLowerCase();
}

/**
 * Whether `text` is the statement postgres.js sends once on each connection it opens, before any
 * other: the lookup of the server's array types (its `fetch_types`). A connection's cost, not a
 * delivery's: the pool opens one when it grows under load, at any moment of a measure.
 */
function isConnectionSetup(text: string): boolean {
  return /from pg_catalog\.pg_type a\b/.test(text) && /\btyparray\b/.test(text);
}

/**
 * Statements seen on the wire (a database's `onStatement`), and how many of them opened a
 * transaction; the statement that sets up a new connection is not counted.
 */
export class StatementCounter {
  private texts: string[] = [];
  private transactions = 0;
  readonly record = (text: string) => {
    const keyword = statementKeyword(text);
    if (isConnectionSetup(text)) return;
    if (keyword === 'begin') this.transactions += 1;
    else if (keyword !== 'commit' && keyword !== 'rollback') this.texts.push(text);
  };
  /** The counts since the last take, with the statements counted (to name them when a count is over), and starts again from zero. */
  take(): { statements: number; transactions: number; texts: string[] } {
    const taken = { statements: this.texts.length, transactions: this.transactions, texts: this.texts };
    this.texts = [];
    this.transactions = 0;
    return taken;
  }
}
