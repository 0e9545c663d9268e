// The quota service's own CPU and garbage per decision, outside the store and the
// network (bench/service-path.ts), compiled as production runs it; the child runs
// with --trace-gc-nvp, summed per phase by bench/gc-trace.ts.
//
//   npx tsx bench/service-path-run.ts
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { compileServers, OUT_DIR } from './compiled.js';
import { formatPhaseGc, gcPerPhase } from './gc-trace.js';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

await compileServers(REPO_ROOT);
const { stdout } = await promisify(execFile)(process.execPath, ['--trace-gc-nvp', join(REPO_ROOT, OUT_DIR, 'bench', 'service-path.js')], {
  cwd: REPO_ROOT,
  // The GC trace is a line of about 1.5 kB per scavenge.
  maxBuffer: 64 * 2 ** 20,
});
const { phases, rest } = gcPerPhase(stdout);
process.stdout.write(`node ${process.version}\n${rest.trimEnd()}\n${phases.map(formatPhaseGc).join('\n')}\n`);
