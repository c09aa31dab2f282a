export declare const TEMPORAL_CLI_VERSION: string;
export declare const CACHED_CLI_PATH: string;
export declare function findTemporalCli(explicitPath: string | undefined): string | undefined;
export declare function buildTemporalCli(): string | undefined;
