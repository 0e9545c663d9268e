// npm run pack:clients: packs every publishable client package into packages/ (or the
// folder given as the first argument), in build order: each package's prepack compiles
// against the dist of those before it. The install commands in the client READMEs
// install from that folder.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const PACKAGES = [
  '@quota-service/contract',
  '@quota-service/core',
  '@quota-service/client',
  '@quota-service/quotactl',
  '@quota-service/http',
  '@quota-service/mcp',
];

const root = resolve(import.meta.dirname, '..');
const destination = resolve(process.argv[2] ?? join(root, 'packages'));
mkdirSync(destination, { recursive: true });
for (const file of readdirSync(destination)) {
  if (/^quota-service-.*\.tgz$/.test(file)) rmSync(join(destination, file));
}
// The contract's generated code comes from proto/ (npm run gen): made when it is missing
// or older than its sources (a fresh checkout after npm ci, or a changed .proto or .lua).
const files = (dir, pattern) =>
  existsSync(join(root, dir))
    ? readdirSync(join(root, dir), { recursive: true })
        .filter((f) => pattern.test(f))
        .map((f) => statSync(join(root, dir, f)).mtimeMs)
    : [];
const inputs = [...files('proto', /\.proto$/), ...files('src/store/redis/script', /\.lua$/)];
const outputs = [...files('src/gen', /\.ts$/), ...files('clients/contract/src/gen', /\.ts$/), ...files('clients/contract/proto', /\.proto$/)];
if (outputs.length === 0 || !existsSync(join(root, 'clients/contract/src/gen')) || Math.max(...inputs) > Math.min(...outputs)) {
  execFileSync('npm', ['run', 'gen'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
}
const workspaces = PACKAGES.flatMap((name) => ['-w', name]);
const out = execFileSync('npm', ['pack', ...workspaces, '--pack-destination', destination, '--json'], {
  cwd: root,
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
  maxBuffer: 64 * 1024 * 1024,
});
const packed = JSON.parse(out);
for (const entry of packed) console.log(join(destination, entry.filename));
