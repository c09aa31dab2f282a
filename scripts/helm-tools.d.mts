export declare const HELM_MODULE: { module: string; version: string; binaries: Record<string, string> };
export declare const KUBERNETES_VALIDATE: {
  name: string;
  version: string;
  requirements: string;
  command: string;
  minPython: [number, number];
};
export declare const KUBERNETES_VERSION: string;
export declare function ensureHelmTools(): { helm: string; kubernetesValidate: string };
