import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';

/*
 * Open workflows replay their histories on the new code after a deploy. Each history here was
 * recorded by an earlier version of the workflow code (the file's name says what the workflow
 * went through), or by the current one to guard its next change; the current workflow code must
 * replay it to the end without a non-determinism error. A change to the commands a workflow emits
 * is guarded with patched(), and a history recorded before it is added here. Files named
 * `v<version>-…` are what that release had recorded when it stopped for an upgrade, open
 * workflows included: the upgrade test writes them (UPDATE_HISTORIES=1 npm run test:upgrade)
 * from the release before the working tree.
 *
 * The files are `History` messages in protobuf's binary form (`History.encode` of what
 * `handle.fetchHistory()` answers), not the JSON of `temporal workflow show -o json`: this SDK's
 * packages carry two copies of protobufjs, and its JSON loader fails on a type of the other copy.
 */

const HISTORIES = fileURLToPath(new URL('./fixtures/histories', import.meta.url));

describe('recorded workflow histories', () => {
  const files = readdirSync(HISTORIES).filter((file) => file.endsWith('.pb'));

  it('are there to replay', () => {
    expect(files.length).toBeGreaterThanOrEqual(4);
  });

  for (const file of files) {
    it(`replay on the current workflow code: ${file}`, async () => {
      const history = temporal.api.history.v1.History.decode(readFileSync(path.join(HISTORIES, file)));
      await Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history, path.basename(file, '.pb'));
    });
  }
});
