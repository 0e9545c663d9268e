import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { own } from '../../test/support/owned-child.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The build `npm start` runs (make build): the soak measures the process production runs. */
const MAIN = join(REPO_ROOT, 'dist', 'src', 'main.js');

export interface SoakService {
  readonly pid: number;
  readonly port: number;
  /** Log lines by pino level name, so far. */
  readonly levels: Map<string, number>;
  /** The first few warn-or-worse lines, for the report. */
  readonly complaints: string[];
  /** Whether it exited on its own, with what code. */
  exited(): { code: number | null } | undefined;
  /** SIGTERM; resolves with the exit code (null: killed after 15 s). */
  stop(): Promise<number | null>;
}

const LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** Starts dist/src/main.js with `env` on a free loopback port; resolves once health is SERVING. */
export async function startSoakService(env: Record<string, string>): Promise<SoakService> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run make build (make soak does)`);
  const child = spawn(process.execPath, [MAIN], {
    cwd: REPO_ROOT,
    // One process, whose RSS and descriptors the soak samples by its pid.
    env: { PATH: process.env.PATH, QUOTA_GRPC_ADDR: '127.0.0.1:0', QUOTA_WORKERS: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const owner = own(child);
  const levels = new Map<string, number>();
  const complaints: string[] = [];
  let exit: { code: number | null } | undefined;
  child.once('exit', (code) => (exit = { code }));
  let pending = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  const ready = new Promise<number>((resolve, reject) => {
    let port: number | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString()).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        const level = LEVELS[Number(/"level":(\d+)/.exec(line)?.[1])] ?? 'other';
        levels.set(level, (levels.get(level) ?? 0) + 1);
        if (level !== 'info' && level !== 'debug' && level !== 'trace' && complaints.length < 10) complaints.push(line);
        const listening = /"port":(\d+),"msg":"quota service listening"/.exec(line);
        if (listening) port = Number(listening[1]);
        if (line.includes('"msg":"store ready: health SERVING"') && port !== undefined) resolve(port);
      }
    });
    void owner.exited.then(() => reject(new Error(`the service exited before it was SERVING:\n${stderr}`)));
  });
  const port = await ready;
  return {
    pid: child.pid!,
    port,
    levels,
    complaints,
    exited: () => exit,
    async stop() {
      if (exit === undefined) child.kill('SIGTERM');
      const code = await Promise.race([owner.exited.then(() => exit?.code ?? null), new Promise<'late'>((r) => setTimeout(r, 15_000, 'late'))]);
      if (code === 'late') {
        await owner.stop(0);
        return null;
      }
      return code;
    },
  };
}
