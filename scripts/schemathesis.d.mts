export declare const SCHEMATHESIS_VERSION: string;
export declare const SCHEMATHESIS_REQUIREMENTS: string;
export declare const SCHEMATHESIS_VENV: string;
export declare const SCHEMATHESIS_BIN: string;
export declare function ensureSchemathesis(): string;
