import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { own } from '../test/support/owned-child.js';
import { compileServers, OUT_DIR } from './compiled.js';
import { BENCH_POLICIES_YAML } from './servers/bench-policies.js';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Two descriptors per call, as Envoy sends them for a route with a per-user and a per-tenant limit. */
const RLS_YAML = `domain: bench
descriptors:
  - key: user
    limit: { algorithm: token_bucket, capacity: 1000000000, refill_per_second: 1000000 }
  - key: tenant
    limit: { algorithm: token_bucket, capacity: 1000000000, refill_per_second: 1000000 }
`;

export interface WorkersService {
  readonly port: number;
  /** The primary (with one worker: the one process) and its workers, for CPU accounting (bench/cpu.ts). */
  readonly pids: readonly number[];
  /** ShouldRateLimit calls decided so far, by the summed metrics endpoint: those the store decided, and all. */
  decided(): Promise<{ store: number; all: number }>;
  stop(): Promise<void>;
}

/**
 * The service as production runs it (src/main.ts compiled, bench/compiled.ts, with the
 * image's Node flags) with QUOTA_WORKERS=`workers` on Redis `redisUrl`; resolves once
 * every worker reported health SERVING.
 */
export async function startWorkersService(workers: number, redisUrl: string): Promise<WorkersService> {
  await compileServers(REPO_ROOT);
  const dir = await mkdtemp(join(tmpdir(), 'quota-workers-bench-'));
  await writeFile(join(dir, 'policies.yaml'), BENCH_POLICIES_YAML);
  await mkdir(join(dir, 'rls'));
  await writeFile(join(dir, 'rls', 'bench.yaml'), RLS_YAML);
  const child = spawn(process.execPath, ['--max-semi-space-size=32', join(REPO_ROOT, OUT_DIR, 'src', 'main.js')], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH,
      QUOTA_WORKERS: String(workers),
      QUOTA_REDIS_URL: redisUrl,
      QUOTA_GRPC_ADDR: '127.0.0.1:0',
      QUOTA_POLICIES: join(dir, 'policies.yaml'),
      QUOTA_RLS_CONFIG: join(dir, 'rls'),
      QUOTA_METRICS_ADDR: '127.0.0.1:0',
      // Budgets no busy spell of a shared machine runs out: every counted decision is the store's, never a failure mode's.
      QUOTA_RLS_STORE_TIMEOUT_MS: '5000',
      QUOTA_STORE_TIMEOUT_MS: '5000',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const owner = own(child);
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  let workerPids: number[] = [];
  const [port, metricsPort] = await new Promise<[number, number]>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const ready = stdout.split('\n').filter((line) => line.includes('"msg":"store ready: health SERVING"')).length;
      const listening = /"port":(\d+),"msg":"quota service listening"/.exec(stdout);
      // The primary's line has a field more (summing) between the port and the message.
      const metrics = /"port":(\d+),[^\n]*"msg":"metrics at GET \/metrics"/.exec(stdout);
      const all = /"workers":\[([\d,]+)\],"msg":"all workers listening"/.exec(stdout);
      if (all) workerPids = all[1]!.split(',').map(Number);
      if (ready >= workers && listening && metrics) resolve([Number(listening[1]), Number(metrics[1])]);
      // Only the start-up lines are of use here.
      if (ready >= workers) stdout = '';
    });
    void owner.exited.then(() => reject(new Error(`QUOTA_WORKERS=${workers}: the service exited before it was SERVING:\n${stderr}`)));
  });
  return {
    port,
    pids: [child.pid!, ...workerPids],
    async decided() {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      const samples = text.split('\n').filter((line) => line.startsWith('quota_rls_requests_total{'));
      const sum = (lines: string[]) => lines.reduce((total, line) => total + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
      return { store: sum(samples.filter((line) => line.includes('source="store"'))), all: sum(samples) };
    },
    async stop() {
      await owner.stop(15_000);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
