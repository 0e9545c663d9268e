import { spawn } from 'node:child_process';
import { createClient, type Channel } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import type { NetworkNamespace } from './netns.js';
import { own } from './owned-child.js';
import { TS_NODE_ARGS } from './ts-node-args.js';

/** A real service process as `make run` starts it (through tsx, no build step), owned by the test. */
export interface ServiceProcess {
  readonly pid: number;
  /** The gRPC port, once the service logged it. */
  readonly port: Promise<number>;
  /** The exit code, once it exited. */
  readonly exit: Promise<number | null>;
  /** Everything it wrote so far. */
  output(): { stdout: string; stderr: string };
  /** Resolves at the `occurrence`th (default first) stdout line matching `pattern`, already written or to come. */
  logged(pattern: RegExp, occurrence?: number): Promise<string>;
  signal(signal: NodeJS.Signals): void;
  /** Closes this end of its stdout pipe, as a log reader that went away does: its next write fails with EPIPE. */
  closeStdout(): void;
}

export interface ServiceProcessOptions {
  /** Run inside this namespace (test/support/netns.ts): set QUOTA_GRPC_ADDR to its address to reach it from here. */
  netns?: NetworkNamespace;
}

export function startServiceProcess(env: Record<string, string>, options: ServiceProcessOptions = {}): ServiceProcess {
  const argv = [process.execPath, ...TS_NODE_ARGS, 'src/main.ts'];
  const [command, args] = options.netns === undefined ? [process.execPath, argv.slice(1)] : options.netns.command(argv);
  const child = spawn(command, args, {
    // A generous store budget unless the test sets one: on a busy CI machine a stall past the
    // production default (50 ms) would hand a decision to the failure mode and skew counts.
    // One process unless the test asks for workers (test/workers/): with Redis the default is one
    // per CPU, and a test of one process's behaviour (its pid, its signals, its local limiter) means one.
    env: { PATH: process.env.PATH, QUOTA_GRPC_ADDR: '127.0.0.1:0', QUOTA_STORE_TIMEOUT_MS: '2000', QUOTA_WORKERS: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  own(child);
  let stdout = '';
  let stderr = '';
  const waiters: { pattern: RegExp; occurrence: number; resolve: (line: string) => void }[] = [];
  const check = () => {
    for (const waiter of [...waiters]) {
      const line = stdout.split('\n').filter((l) => waiter.pattern.test(l))[waiter.occurrence - 1];
      if (line !== undefined) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  };
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    check();
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const logged = (pattern: RegExp, occurrence = 1) =>
    new Promise<string>((resolve, reject) => {
      waiters.push({ pattern, occurrence, resolve });
      check();
      void exit.then(() => reject(new Error(`service exited before logging ${pattern}: ${stderr}\n${stdout}`)));
    });
  const port = logged(/"msg":"quota service listening"/).then((line) => Number(/"port":(\d+)/.exec(line)![1]));
  port.catch(() => {});
  return {
    pid: child.pid!,
    port,
    exit,
    output: () => ({ stdout, stderr }),
    logged,
    signal: (signal) => child.kill(signal),
    closeStdout: () => child.stdout.destroy(),
  };
}

/** Waits, as a load balancer or Kubernetes probe would, until health says SERVING. */
export async function untilServing(channel: Channel, service = ''): Promise<void> {
  const health = createClient(HealthDefinition, channel);
  const deadline = Date.now() + 15_000;
  while ((await health.check({ service }).catch(() => ({ status: 0 }))).status !== 1) {
    if (Date.now() > deadline) throw new Error('service never reported SERVING');
    await new Promise((r) => setTimeout(r, 20));
  }
}
