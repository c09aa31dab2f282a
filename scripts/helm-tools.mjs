#!/usr/bin/env node
// The tools of the Helm chart's offline checks (`npm run test:helm`): helm, built with Go into
// .tools/bin (src/local/go-tools.mjs), and kubernetes-validate, the Kubernetes API schema validator,
// installed into a Python virtual environment in .tools (scripts/python-tools.mjs). Both pinned,
// both built or installed once.
//
//   node scripts/helm-tools.mjs   builds or installs what is missing, then prints both paths
//
// Needs Go >= 1.25 and Python >= 3.11 with the venv module (Debian: apt-get install python3-venv)
// on the first run.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureGoBinaries } from '../src/local/go-tools.mjs';
import { ensurePythonTool } from './python-tools.mjs';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** helm, from its Go module (v4.1 is the last line that builds with Go 1.25). */
export const HELM_MODULE = {
  module: 'helm.sh/helm/v4',
  version: 'v4.1.4',
  binaries: { helm: 'helm.sh/helm/v4/cmd/helm' },
};

/** kubernetes-validate, pinned with its dependencies in scripts/kubernetes-validate-requirements.txt. */
export const KUBERNETES_VALIDATE = {
  name: 'kubernetes-validate',
  version: '1.37.0',
  requirements: path.join(projectRoot, 'scripts', 'kubernetes-validate-requirements.txt'),
  command: 'kubernetes-validate',
  minPython: /** @type {[number, number]} */ ([3, 11]),
};

/** The Kubernetes version the chart is rendered for (`helm --kube-version`) and validated against. */
export const KUBERNETES_VERSION = '1.33.0';

/**
 * Paths of helm and kubernetes-validate, building or installing whichever is missing.
 * @returns {{ helm: string, kubernetesValidate: string }}
 */
export function ensureHelmTools() {
  return { helm: ensureGoBinaries([HELM_MODULE]).helm, kubernetesValidate: ensurePythonTool(KUBERNETES_VALIDATE) };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const tools = ensureHelmTools();
    console.log(`${tools.helm}\n${tools.kubernetesValidate}`);
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  }
}
