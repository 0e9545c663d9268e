import { spawn } from 'node:child_process';
import { runQuotactl } from '../../clients/quotactl/src/program.js';
import { own } from './owned-child.js';
import { TS_NODE_ARGS } from './ts-node-args.js';

/** The quotactl entry, run from source as `make` runs TypeScript (no build). */
export const QUOTACTL_SOURCE = 'clients/quotactl/src/quotactl.ts';

export interface QuotactlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface QuotactlRunOptions {
  env?: Record<string, string>;
  /** Pretend stdout (and stderr) is a terminal: tables with borders, in-place refresh, a progress bar. */
  tty?: boolean;
  /** Aborting it is Ctrl-C. */
  interrupt?: AbortSignal;
  /** Called with stdout's text so far after each write (watch tests wait on it). */
  onStdout?: (stdout: string) => void;
  /** Likewise for stderr (where bench's progress bar goes). */
  onStderr?: (stderr: string) => void;
}

/**
 * quotactl run in-process through its real program (commander, the real
 * gRPC channel to a real service), with its own streams and environment: a
 * process spawn per command would cost a second or more of tsx start-up each.
 */
export async function quotactl(args: readonly string[], options: QuotactlRunOptions = {}): Promise<QuotactlResult> {
  let stdout = '';
  let stderr = '';
  const tty = options.tty === true;
  const code = await runQuotactl(args, {
    stdout: {
      isTTY: tty,
      columns: 120,
      write: (text: string) => {
        stdout += text;
        options.onStdout?.(stdout);
        return true;
      },
    },
    stderr: {
      isTTY: tty,
      columns: 120,
      write: (text: string) => {
        stderr += text;
        options.onStderr?.(stderr);
        return true;
      },
    },
    env: options.env ?? {},
    cwd: process.cwd(),
    interrupt: options.interrupt ?? new AbortController().signal,
  });
  return { code, stdout, stderr };
}

/** The parsed JSON lines of a run's stdout. */
export const jsonLines = <T = Record<string, unknown>>(stdout: string): T[] =>
  stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as T);

export interface QuotactlProcess {
  readonly stdout: () => string;
  readonly stderr: () => string;
  /** Resolves once stdout matches `pattern`. */
  until(pattern: RegExp): Promise<void>;
  signal(signal: NodeJS.Signals): void;
  readonly exit: Promise<number | null>;
}

/** quotactl as its own process (through tsx), for what only a process shows: signals, the real exit status. */
export function spawnQuotactl(args: readonly string[], env: Record<string, string> = {}): QuotactlProcess {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, QUOTACTL_SOURCE, ...args], {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  own(child);
  let stdout = '';
  let stderr = '';
  const waiters: { pattern: RegExp; resolve: () => void }[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    for (const waiter of [...waiters]) {
      if (waiter.pattern.test(stdout)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    until: (pattern) =>
      new Promise<void>((resolve, reject) => {
        if (pattern.test(stdout)) return resolve();
        waiters.push({ pattern, resolve });
        void exit.then((code) => reject(new Error(`quotactl exited (${code}) before printing ${pattern}:\n${stdout}\n${stderr}`)));
      }),
    signal: (signal) => child.kill(signal),
    exit,
  };
}
