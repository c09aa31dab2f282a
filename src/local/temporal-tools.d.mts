export declare const TEMPORAL_MODULES: Record<
  'cli' | 'server' | 'ui',
  { module: string; version: string; binaries: Record<string, string> }
>;
export declare const TEMPORAL_CLI_VERSION: string;
export declare const CACHED_CLI_PATH: string;
export declare const TEMPORAL_SCHEMA_DIR: string;
export declare function findTemporalCli(explicitPath: string | undefined): string | undefined;
export declare function ensureTemporalTools(keys: ('cli' | 'server' | 'ui')[]): Record<string, string>;
export declare function buildTemporalCli(): string | undefined;
export declare function main(args: string[]): void;
