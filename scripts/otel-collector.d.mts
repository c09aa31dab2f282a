export declare const COLLECTOR_BUILDER: { module: string; version: string; binaries: Record<string, string> };
export declare const COLLECTOR_MANIFEST: string;
export declare const COLLECTOR_PATH: string;
export declare function isCollectorCurrent(): boolean;
export declare function ensureCollector(): string;
