/** The keyword a statement seen on the wire (a database's `onStatement`) starts with, lower-cased: `begin`, `select`, `with`, … */
export function statementKeyword(text: string): string | undefined {
  return /^\s*(\w+)/.exec(text)?.[1]?.toLowerCase();
}

/** Statements seen on the wire (a database's `onStatement`), and how many of them opened a transaction. */
export class StatementCounter {
  statements = 0;
  transactions = 0;
  readonly record = (text: string) => {
    const keyword = statementKeyword(text);
    if (keyword === 'begin') this.transactions += 1;
    else if (keyword !== 'commit' && keyword !== 'rollback') this.statements += 1;
  };
  /** The counts since the last take, and starts again from zero. */
  take(): { statements: number; transactions: number } {
    const taken = { statements: this.statements, transactions: this.transactions };
    this.statements = 0;
    this.transactions = 0;
    return taken;
  }
}
