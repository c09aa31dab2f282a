export declare const PROMTOOL_MODULE: { module: string; version: string; binaries: { promtool: string }; tags: string[] };
export declare const PROMETHEUS_VERSION: string;
export declare function ensurePromtool(): string;
