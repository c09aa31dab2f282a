/**
 * The layout's rules, read from the code's own imports (docs/architecture.md, "The map"):
 * runtime code never reaches into the project's tools, benchmarks or tests; workflow code imports
 * only what the workflow sandbox is meant to run; Temporal's SDK is used in its own wing; and an
 * event's path from the producers' door to the endpoint only goes down.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** One import of a file: what it names, and whether it brings in types only. */
interface ImportOf {
  specifier: string;
  typeOnly: boolean;
}

/**
 * The imports of a TypeScript or JavaScript module: static imports and re-exports, dynamic
 * `import()`, and files located with `new URL(…, import.meta.url)` (which a module runs or forks).
 */
function importsOf(source: string): ImportOf[] {
  const found: ImportOf[] = [];
  const statics = /^\s*(import|export)\s+(type\s+)?([^'";]*?)\s*from\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]/gm;
  for (const match of source.matchAll(statics)) {
    if (match[5]) {
      found.push({ specifier: match[5], typeOnly: false });
      continue;
    }
    const names = match[3] ?? '';
    // `import { type A, type B } from` brings in types only, as `import type` does.
    const braced = /^\{([^}]*)\}$/.exec(names.trim());
    const allTypes = braced !== null && braced[1]!.split(',').filter((name) => name.trim()).every((name) => name.trim().startsWith('type '));
    found.push({ specifier: match[4]!, typeOnly: Boolean(match[2]) || allTypes });
  }
  for (const match of source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push({ specifier: match[1]!, typeOnly: false });
  for (const match of source.matchAll(/new URL\(\s*['"]([^'"]+)['"]\s*,\s*import\.meta\.url\s*\)/g)) found.push({ specifier: match[1]!, typeOnly: false });
  return found;
}

function filesUnder(folder: string): string[] {
  return readdirSync(path.join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && /\.(ts|mts|mjs)$/.test(entry.name))
    .map((entry) => path.relative(ROOT, path.join(entry.parentPath, entry.name)));
}

/** A relative specifier as a path from the project's root; a package name as it is. */
function resolve(file: string, specifier: string): string {
  return specifier.startsWith('.') ? path.normalize(path.join(path.dirname(file), specifier)) : specifier;
}

const RUNTIME = [...filesUnder('src'), ...filesUnder('workflows'), ...filesUnder('activities')];
const WORKFLOWS = filesUnder('workflows');
/** Where Temporal's SDK may be imported for more than its types. */
const TEMPORAL_WING = ['workflows/', 'activities/', 'src/temporal/', 'src/local/'];
/** What a workflow file may import for more than types: the sandbox's own API and the tracing interceptors'. */
const WORKFLOW_PACKAGES = [/^@temporalio\/workflow$/, /^@temporalio\/common$/, /^@temporalio\/interceptors-opentelemetry(\/|$)/, /^@opentelemetry\/api$/];

/** `rule(file, import)` answers why the import breaks it, or nothing; every break in `files`. */
function breaks(files: readonly string[], rule: (file: string, imported: ImportOf & { target: string }) => string | undefined): string[] {
  return files.flatMap((file) =>
    importsOf(readFileSync(path.join(ROOT, file), 'utf8')).flatMap((imported) => {
      const why = rule(file, { ...imported, target: resolve(file, imported.specifier) });
      return why ? [`${file}: ${imported.specifier} (${why})`] : [];
    }),
  );
}

const outsideTheService = (_file: string, { target }: { target: string }) => {
  if (target === path.normalize('scripts/typescript.mjs')) return undefined; // the TypeScript loader of `npm start`, the bin and the image
  for (const folder of ['scripts', 'bench', 'test']) if (target.startsWith(`${folder}/`)) return `runtime code imports ${folder}/`;
  return undefined;
};

const beyondTheSandbox = (file: string, { specifier, target, typeOnly }: ImportOf & { target: string }) => {
  if (typeOnly) return undefined;
  if (specifier.startsWith('.')) return path.dirname(target) === path.dirname(file) ? undefined : 'a workflow imports a file outside workflows/';
  return WORKFLOW_PACKAGES.some((allowed) => allowed.test(specifier)) ? undefined : 'a workflow imports a package the sandbox is not meant to run';
};

const temporalOutsideItsWing = (file: string, { specifier, typeOnly }: ImportOf) => {
  if (typeOnly || !specifier.startsWith('@temporalio/')) return undefined;
  return TEMPORAL_WING.some((folder) => file.startsWith(folder)) ? undefined : "Temporal's SDK outside its wing";
};

/**
 * The files of an event's path (docs/architecture.md, "An event's path"), each with its step:
 * every file written in backquotes on a step's line of the list. A file named at two steps is
 * an error of the list.
 */
function eventPath(): Map<string, number> {
  const doc = readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');
  const section = doc.split("### An event's path")[1]?.split(/^### /m)[0] ?? '';
  const steps = new Map<string, number>();
  for (const [, step, line] of section.matchAll(/^(\d+)\. (.*)$/gm)) {
    for (const [, file] of line!.matchAll(/`((?:src|workflows|activities)\/[^`]+\.ts)`/g)) {
      if (steps.has(file!)) throw new Error(`${file} is named at steps ${steps.get(file!)} and ${step} of the event's path`);
      steps.set(file!, Number(step));
    }
  }
  return steps;
}

const EVENT_PATH = eventPath();

/** An import, for more than types, of a file of the event's path from a later step of it. */
const upThePath = (file: string, { target, typeOnly }: ImportOf & { target: string }) => {
  const from = EVENT_PATH.get(file);
  const to = EVENT_PATH.get(target);
  if (typeOnly || from === undefined || to === undefined || to >= from) return undefined;
  return `step ${from} of the event's path imports step ${to}`;
};

describe('the layout', () => {
  it('reads every kind of import a module makes', () => {
    const source = [
      "import { Worker } from '@temporalio/worker';",
      "import type { Client } from '@temporalio/client';",
      "import { type Connection, type Client as C } from '@temporalio/client';",
      "import { type Span, trace } from '@opentelemetry/api';",
      "export * from './delivery.ts';",
      "import './side-effect.ts';",
      "const { NativeConnection } = await import('@temporalio/worker');",
      "const SCRIPT = fileURLToPath(new URL('../scripts/bundle.ts', import.meta.url));",
    ].join('\n');
    expect(importsOf(source)).toEqual([
      { specifier: '@temporalio/worker', typeOnly: false },
      { specifier: '@temporalio/client', typeOnly: true },
      { specifier: '@temporalio/client', typeOnly: true },
      { specifier: '@opentelemetry/api', typeOnly: false },
      { specifier: './delivery.ts', typeOnly: false },
      { specifier: './side-effect.ts', typeOnly: false },
      { specifier: '@temporalio/worker', typeOnly: false },
      { specifier: '../scripts/bundle.ts', typeOnly: false },
    ]);
  });

  it('finds the runtime files', () => {
    expect(RUNTIME).toContain(path.normalize('src/main.ts'));
    expect(RUNTIME).toContain(path.normalize('src/local/temporal-tools.mjs'));
    expect(WORKFLOWS).toContain(path.normalize('workflows/delivery.ts'));
  });

  it('keeps runtime code out of scripts/ (the TypeScript loader aside), bench/ and test/', () => {
    expect(outsideTheService('src/worker.ts', { target: 'scripts/bundle-workflows.ts' })).toBeDefined();
    expect(breaks(RUNTIME, outsideTheService)).toEqual([]);
  });

  it("keeps workflow code to the sandbox's API, the tracing interceptors, its sibling files and types", () => {
    expect(beyondTheSandbox('workflows/delivery.ts', { specifier: '../src/db/client.ts', target: 'src/db/client.ts', typeOnly: false })).toBeDefined();
    expect(beyondTheSandbox('workflows/delivery.ts', { specifier: 'node:crypto', target: 'node:crypto', typeOnly: false })).toBeDefined();
    expect(breaks(WORKFLOWS, beyondTheSandbox)).toEqual([]);
  });

  it("keeps every import on an event's path pointing down the path or across a step (docs/architecture.md)", () => {
    expect(EVENT_PATH.get('src/api/routes/events.ts')).toBe(1);
    expect(EVENT_PATH.get('src/delivery/sender.ts')).toBe(10);
    for (const file of EVENT_PATH.keys()) expect(RUNTIME, `${file}, named on the event's path`).toContain(path.normalize(file));
    expect(upThePath('activities/attempt.ts', { specifier: '../src/db/sealing.ts', target: 'src/db/queries/events.ts', typeOnly: false })).toBeDefined();
    expect(breaks([...EVENT_PATH.keys()], upThePath)).toEqual([]);
  });

  it("uses Temporal's SDK for more than types only in workflows/, activities/, src/temporal/ and src/local/", () => {
    expect(temporalOutsideItsWing('src/runtime.ts', { specifier: '@temporalio/client', typeOnly: false })).toBeDefined();
    expect(breaks(RUNTIME, temporalOutsideItsWing)).toEqual([]);
  });
});
