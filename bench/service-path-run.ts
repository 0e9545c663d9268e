// The quota service's own CPU per decision, outside the store and the network
// (bench/service-path.ts), compiled as production runs it.
//
//   npx tsx bench/service-path-run.ts
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { compileServers, OUT_DIR } from './compiled.js';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

await compileServers(REPO_ROOT);
const { stdout } = await promisify(execFile)(process.execPath, [join(REPO_ROOT, OUT_DIR, 'bench', 'service-path.js')], { cwd: REPO_ROOT });
process.stdout.write(`node ${process.version}\n${stdout}`);
