/** Starts bench/receiver.ts as a child process and collects what it reports. */
import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FromReceiver, ReceiverBatch, ReceiverBehaviour, ReceiverCounters, ReceiverOptions, ToReceiver } from '../receiver.ts';
import { loopbackCertificate } from './loopback-certificate.ts';

const RECEIVER = fileURLToPath(new URL('../receiver.ts', import.meta.url));

export interface ReceiverHandle {
  readonly pid: number;
  readonly port: number;
  /** Base URL; webhook i is `${url}/hooks/${i}`. */
  readonly url: string;
  counters: ReceiverCounters | undefined;
  setSecrets(secrets: string[]): void;
  /** Changes how it answers from now on (e.g. a failing endpoint that recovers). */
  setBehaviour(behaviour: Partial<ReceiverBehaviour>): void;
  /** Resolves once every request received so far has been reported. */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts bench/receiver.ts with `options`; `onBatch` gets what it reports every 100 ms. */
export async function startReceiver(
  options: ReceiverOptions,
  onBatch: (batch: ReceiverBatch) => void,
): Promise<ReceiverHandle> {
  const child = fork(RECEIVER, [JSON.stringify(options)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // Its own process group: a Ctrl-C in the terminal reaches only the bench, which stops it.
    detached: true,
  });
  const flushWaiters: (() => void)[] = [];
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the receiver did not start within 30 s')), 30_000);
    child.once('exit', (code) => reject(new Error(`the receiver exited (${code}) before listening`)));
    child.on('message', (message: FromReceiver) => {
      if (message.type === 'listening') {
        clearTimeout(timer);
        resolve(message.port);
      }
    });
  });
  const handle: ReceiverHandle = {
    pid: child.pid!,
    port,
    url: `https://${options.host ?? '127.0.0.1'}:${port}`,
    counters: undefined,
    setSecrets(secrets) {
      child.send({ type: 'secrets', secrets } satisfies ToReceiver);
    },
    setBehaviour(behaviour) {
      child.send({ type: 'behaviour', behaviour } satisfies ToReceiver);
    },
    flush() {
      return new Promise((resolve) => {
        flushWaiters.push(resolve);
        child.send({ type: 'flush' } satisfies ToReceiver);
      });
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ type: 'stop' } satisfies ToReceiver);
      const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      await exited;
      clearTimeout(timer);
    },
  };
  child.on('message', (message: FromReceiver) => {
    if (message.type === 'batch') {
      handle.counters = message.counters;
      onBatch(message);
    } else if (message.type === 'flushed') {
      flushWaiters.shift()?.();
    }
  });
  return handle;
}

/**
 * A receiver of the run with the self-signed certificate for the loopback addresses in
 * `workDir/cert` (made by the first, shared by the others; the service trusts its file), on
 * `behaviour.host` (127.0.0.1 unless given).
 */
export async function startCertifiedReceiver(
  workDir: string,
  behaviour: Omit<ReceiverOptions, 'keyFile' | 'certFile'>,
  onBatch: (batch: ReceiverBatch) => void,
): Promise<{ receiver: ReceiverHandle; certFile: string }> {
  const certificate = loopbackCertificate(path.join(workDir, 'cert'), 2);
  const receiver = await startReceiver({ keyFile: certificate.keyFile, certFile: certificate.certFile, ...behaviour }, onBatch);
  return { receiver, certFile: certificate.certFile };
}
