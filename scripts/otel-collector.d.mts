/** The collector's path in .tools/bin, built first unless current. */
export declare function ensureCollector(): string;
