/**
 * A function that grows past a screenful is asking to be split by role: none outside the tests is
 * over 120 lines (docs/architecture.md, "The map"). The lines counted are a function's own, from
 * its first to its last, nested functions included.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAX_LINES = 120;
const FOLDERS = ['src', 'workflows', 'activities', 'bench', 'scripts'];
/** Written by a generator, not by hand. */
const GENERATED = new Set([path.normalize('src/client/schema.ts')]);

function sourceFiles(): string[] {
  return FOLDERS.flatMap((folder) =>
    readdirSync(path.join(ROOT, folder), { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && /\.(ts|mts|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.mts'))
      .map((entry) => path.relative(ROOT, path.join(entry.parentPath, entry.name)))
      .filter((file) => !GENERATED.has(file)),
  );
}

/** The name a function goes by: its own, or that of the variable or property it is assigned to. */
function nameOf(node: ts.FunctionLikeDeclaration): string {
  if (node.name) return node.name.getText();
  const { parent } = node;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) && parent.name) return parent.name.getText();
  return '(anonymous)';
}

/** Every function of `text` (the source of `file`) longer than {@link MAX_LINES}, as `file:line name (n lines)`. */
function longFunctions(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isArrowFunction(node) || ts.isFunctionExpression(node)) {
      const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const lines = source.getLineAndCharacterOfPosition(node.getEnd()).line - first + 1;
      if (lines > MAX_LINES) found.push(`${file}:${first + 1} ${nameOf(node)} (${lines} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

it(`no function outside the tests is over ${MAX_LINES} lines`, () => {
  const files = sourceFiles();
  expect(files.length).toBeGreaterThan(100);
  expect(files.flatMap((file) => longFunctions(file, readFileSync(path.join(ROOT, file), 'utf8')))).toEqual([]);
});

it('counts a function from its first line to its last, and names an arrow function by its variable', () => {
  const lines = (n: number) => Array.from({ length: n }, (_, i) => `  const line${i} = ${i};`).join('\n');
  // 120 lines in all (the body's 118, its first and its last) pass; 121 do not.
  const text = `export function fits() {\n${lines(MAX_LINES - 2)}\n}\nexport const tooLong = () => {\n${lines(MAX_LINES - 1)}\n};\n`;
  expect(longFunctions('probe.ts', text)).toEqual([`probe.ts:${MAX_LINES + 1} tooLong (${MAX_LINES + 1} lines)`]);
});
