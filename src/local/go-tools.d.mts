export interface GoModuleSpec {
  module: string;
  version: string;
  binaries: Record<string, string>;
  tags?: string[];
  ldflags?: string;
  inScratchModule?: boolean;
}
export declare const projectRoot: string;
export declare const BIN_DIR: string;
export declare function isExecutable(file: string): boolean;
export declare function onPath(command: string): string | undefined;
export declare function isCurrent(go: string | undefined, spec: GoModuleSpec): boolean;
export declare function goInstall(go: string, key: string, spec: GoModuleSpec, env?: Record<string, string>): void;
export declare function missingGoMessage(specs: GoModuleSpec[]): string;
export declare function ensureGoBinaries(specs: GoModuleSpec[]): Record<string, string>;
