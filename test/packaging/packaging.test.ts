import { existsSync } from 'node:fs';
import { lstat, mkdtemp, readdir, readFile, readlink, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';
import { createConsumerProject, createProjectWith } from './consumer-project.js';
import { importSpecifiers, isBuiltin, isRelative, packageName, packagesReached } from './imports.js';
import { CLIENT_PACKAGES, packAsReadmeSays, REPO_ROOT, type PackedPackage } from './pack-clients.js';
import { describeInstalledRuntimes } from './installed-runtimes.js';
import { describeReadmeInstall } from './readme-install.js';
import { npmEnv, RUN_TIMEOUT_MS, runChild, TEST_TIMEOUT_MS } from './run-child.js';

// The published packages as a user gets them: packed by the READMEs' command (npm run
// pack:clients), installed from the tarballs
// into a project outside the repository, run with plain node (no tsx, no source
// condition, no workspace links) against a real quota service, on the machine's
// Node and on Node 22. Catches what in-repo tests cannot: a file missing from
// `files`, an export pointing at nothing, an undeclared dependency, an import of
// a server file.

/** Packing (six tsc builds) and installing take ~30 s here; generous for a loaded machine. */
const SETUP_TIMEOUT_MS = 240_000;

let work: string | undefined;
let consumerDir: string;
/** A project that installs the client library alone (with the contract and core it depends on), not quotactl. */
let clientOnlyDir: string;
let packed: PackedPackage[];
let service: ServiceProcess | undefined;
let address: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'quota-packaging-'));
  consumerDir = join(work, 'consumer');
  clientOnlyDir = join(work, 'client-only');
  packed = await packAsReadmeSays();
  // After the pack, which may generate the contract's code the service imports too.
  service = startServiceProcess({});
  console.log(`packaging: tarball sizes (bytes, gzipped): ${packed.map((p) => `${p.name} ${p.size}`).join(', ')}`);
  await createConsumerProject(consumerDir, packed);
  await createProjectWith(clientOnlyDir, packed, ['@quota-service/client', '@quota-service/core', '@quota-service/contract']);
  address = `127.0.0.1:${await service.port}`;
}, SETUP_TIMEOUT_MS);

afterAll(async () => {
  if (service !== undefined) {
    service.signal('SIGTERM');
    const timer = setTimeout(() => service?.signal('SIGKILL'), 5_000);
    await service.exit;
    clearTimeout(timer);
  }
  if (work !== undefined) await rm(work, { recursive: true, force: true });
}, 30_000);

/** What quotactl needs and a service calling the quota service does not. */
const CLI_ONLY_DEPENDENCIES = ['cli-progress', 'cli-table3', 'commander', 'ms', 'picocolors'];

/** The consumer's environment: nothing inherited beyond PATH and HOME (no NODE_OPTIONS, no conditions). */
const consumerEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: process.env.HOME, QUOTA_SERVICE_ADDRESS: address });

const within = (path: string, dir: string) => path === dir || path.startsWith(dir + sep);

describe('the packed client packages', () => {
  it('each tarball holds package.json, LICENSE and dist, and no sources or tests', () => {
    for (const p of packed) {
      expect(p.files, p.name).toContain('package.json');
      expect(p.files, p.name).toContain('LICENSE');
      expect(p.files, p.name).toContain('dist/index.js');
      expect(p.files, p.name).toContain('dist/index.d.ts');
      // quotactl's bin/ holds its launcher (a file that exists before a build, so a workspace links it).
      const launcher = (f: string) => p.name === '@quota-service/quotactl' && f === 'bin/quotactl.js';
      // The contract's proto/ holds the .proto files any gRPC client can load (Envoy's rate limit API, health, quota.v1).
      const proto = (f: string) => p.name === '@quota-service/contract' && f.startsWith('proto/') && f.endsWith('.proto');
      if (p.name === '@quota-service/contract') {
        for (const file of ['proto/envoy/service/ratelimit/v3/rls.proto', 'proto/grpc/health/v1/health.proto', 'proto/quota/v1/quota.proto']) {
          expect(p.files, p.name).toContain(file);
        }
      }
      const stray = p.files.filter((f) => !['package.json', 'README.md', 'LICENSE'].includes(f) && !f.startsWith('dist/') && !launcher(f) && !proto(f));
      expect(stray, `${p.name}: files outside dist`).toEqual([]);
      expect(
        p.files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')),
        `${p.name}: TypeScript sources`,
      ).toEqual([]);
    }
  });

  it('installs into a project outside the repository: copies from the tarballs, no link into the repository', async () => {
    expect(within(consumerDir, REPO_ROOT)).toBe(false);
    // Node would also resolve from a node_modules in any ancestor directory.
    for (let dir = dirname(consumerDir); dir !== dirname(dir); dir = dirname(dir)) {
      expect(existsSync(join(dir, 'node_modules')), `${dir}/node_modules exists: the consumer would not be isolated`).toBe(false);
    }
    const lock = JSON.parse(await readFile(join(consumerDir, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { resolved?: string; link?: boolean }>;
    };
    const installed = Object.entries(lock.packages).filter(([path]) => path.includes('node_modules/@quota-service/'));
    // One copy of each, the top-level one, resolved from its tarball (not the registry, not a link).
    expect(installed.map(([path]) => path).sort()).toEqual(CLIENT_PACKAGES.map((name) => `node_modules/${name}`).sort());
    for (const [path, entry] of installed) {
      const name = path.slice('node_modules/'.length);
      const tarball = packed.find((p) => p.name === name)!.tarball;
      expect(entry.link, path).toBeUndefined();
      expect(resolve(consumerDir, (entry.resolved ?? '').replace(/^file:/, '')), `${path} resolved from`).toBe(tarball);
    }
    const scope = join(consumerDir, 'node_modules', '@quota-service');
    for (const entry of await readdir(scope, { recursive: true })) {
      const path = join(scope, entry);
      expect((await lstat(path)).isSymbolicLink(), `${path} is a symlink`).toBe(false);
    }
    // Nowhere in node_modules (.bin included) does a link lead into the repository.
    const links = [];
    for (const entry of await readdir(join(consumerDir, 'node_modules'), { recursive: true, withFileTypes: true })) {
      if (entry.isSymbolicLink()) links.push(join(entry.parentPath, entry.name));
    }
    const intoRepo = [];
    for (const link of links) {
      const target = await realpath(link).catch(async () => resolve(dirname(link), await readlink(link)));
      if (within(target, REPO_ROOT)) intoRepo.push(`${link} -> ${target}`);
    }
    expect(intoRepo).toEqual([]);
  });

  it("every export's types and default point at a file the installed package has", async () => {
    for (const name of CLIENT_PACKAGES) {
      const dir = join(consumerDir, 'node_modules', name);
      const manifest = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as {
        exports: Record<string, string | Record<string, string>>;
      };
      for (const [subpath, target] of Object.entries(manifest.exports)) {
        if (subpath === './package.json') continue;
        const targets = typeof target === 'string' ? { default: target } : target;
        for (const condition of ['types', 'default'] as const) {
          const file = targets[condition];
          expect(file, `${name} exports["${subpath}"].${condition}`).toBeDefined();
          expect(existsSync(join(dir, file!)), `${name} exports["${subpath}"].${condition} -> ${file} is missing`).toBe(true);
        }
      }
    }
  });

  it("each package's dist imports only its own files, Node builtins and its declared dependencies and peers", async () => {
    // Hoisting in node_modules hides an undeclared dependency that a peer also brings
    // (express brings proxy-addr); the manifest must name it anyway.
    const problems = new Set<string>();
    for (const name of CLIENT_PACKAGES) {
      const dir = join(consumerDir, 'node_modules', name);
      const manifest = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as {
        dependencies?: Record<string, string>;
        peerDependencies?: Record<string, string>;
      };
      const declared = new Set([name, ...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})]);
      const files = (await readdir(join(dir, 'dist'), { recursive: true })).filter((f) => /\.(js|d\.ts)$/.test(f));
      for (const file of files) {
        const path = join(dir, 'dist', file);
        for (const specifier of importSpecifiers(await readFile(path, 'utf8'))) {
          if (isBuiltin(specifier)) continue;
          if (isRelative(specifier) ? !within(resolve(dirname(path), specifier), dir) : !declared.has(packageName(specifier))) {
            problems.add(`${name}/dist/${file} imports ${specifier}`);
          }
        }
      }
    }
    expect([...problems]).toEqual([]);
  });

  it('@quota-service/mcp: the main entry never loads SDK 2.x, and /v2 never loads SDK 1.x', async () => {
    const dist = join(consumerDir, 'node_modules', '@quota-service', 'mcp', 'dist');
    expect(await packagesReached(join(dist, 'index.js'))).toEqual(['@quota-service/core', 'pino']);
    expect(await packagesReached(join(dist, 'index.d.ts'))).toEqual(['@modelcontextprotocol/sdk', '@quota-service/core', 'pino']);
    expect(await packagesReached(join(dist, 'v2.js'))).toEqual(['@modelcontextprotocol/server', '@quota-service/core', 'pino']);
    expect(await packagesReached(join(dist, 'v2.d.ts'))).toEqual(['@modelcontextprotocol/server', '@quota-service/core', 'pino']);
  });

  it('each package is licensed Apache-2.0 and ships the license text', async () => {
    const text = await readFile(join(REPO_ROOT, 'LICENSE'), 'utf8');
    expect(text).toMatch(/^\s*Apache License\s+Version 2\.0, January 2004/);
    for (const name of CLIENT_PACKAGES) {
      const dir = join(consumerDir, 'node_modules', name);
      const manifest = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as { license?: string };
      expect(manifest.license, name).toBe('Apache-2.0');
      expect(await readFile(join(dir, 'LICENSE'), 'utf8'), `${name}/LICENSE`).toBe(text);
    }
    // The service and the examples, which are not published, say so too.
    const folders = (await readdir(join(REPO_ROOT, 'clients'))).filter((f) => existsSync(join(REPO_ROOT, 'clients', f, 'package.json')));
    for (const manifest of ['package.json', ...folders.map((f) => join('clients', f, 'package.json'))]) {
      expect((JSON.parse(await readFile(join(REPO_ROOT, manifest), 'utf8')) as { license?: string }).license, manifest).toBe('Apache-2.0');
    }
  });

  it("@quota-service/client neither declares nor loads quotactl's command-line dependencies; quotactl has them", async () => {
    const client = join(consumerDir, 'node_modules', '@quota-service', 'client');
    const manifest = JSON.parse(await readFile(join(client, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; bin?: unknown };
    expect(manifest.bin).toBeUndefined();
    expect(Object.keys(manifest.dependencies).filter((d) => CLI_ONLY_DEPENDENCIES.includes(d))).toEqual([]);
    expect(await packagesReached(join(client, 'dist', 'index.js'))).toEqual(['@grpc/grpc-js', '@quota-service/contract', '@quota-service/core', 'nice-grpc']);
    const quotactl = join(consumerDir, 'node_modules', '@quota-service', 'quotactl', 'dist');
    expect(await packagesReached(join(quotactl, 'quotactl.js'))).toEqual([
      '@grpc/proto-loader',
      '@quota-service/client',
      '@quota-service/contract',
      '@quota-service/core',
      'cli-progress',
      'cli-table3',
      'commander',
      'ms',
      'nice-grpc',
      'picocolors',
    ]);
  });

  it('quotactl starts without gRPC, the contract or the policy parser: the command that needs them loads them', async () => {
    const entry = join(consumerDir, 'node_modules', '@quota-service', 'quotactl', 'dist', 'quotactl.js');
    expect(await packagesReached(entry, { dynamic: false })).toEqual(['cli-progress', 'cli-table3', 'commander', 'ms', 'picocolors']);
  });

  it('a project that installs only the client (with core and contract) gets none of the command-line dependencies, and no quotactl', async () => {
    const { code, stdout, stderr } = await runChild('npm', ['ls', '--omit=dev', '--all', '--json'], {
      cwd: clientOnlyDir,
      env: npmEnv(),
      timeoutMs: RUN_TIMEOUT_MS,
    });
    expect(code, stderr).toBe(0);
    const names = new Set<string>();
    const walk = (tree: { dependencies?: Record<string, unknown> }) => {
      for (const [name, child] of Object.entries(tree.dependencies ?? {})) {
        names.add(name);
        walk(child as { dependencies?: Record<string, unknown> });
      }
    };
    walk(JSON.parse(stdout) as { dependencies?: Record<string, unknown> });
    expect(names).toContain('@quota-service/client');
    expect(names).toContain('nice-grpc');
    expect([...names].filter((n) => CLI_ONLY_DEPENDENCIES.includes(n) || n === '@quota-service/quotactl')).toEqual([]);
    expect(existsSync(join(clientOnlyDir, 'node_modules', '.bin', 'quotactl'))).toBe(false);
  });

  it(
    '`npx quotactl` in the consumer project: --help, and real commands against the service',
    async () => {
      const npx = (args: string[]) =>
        runChild('npx', ['--no-install', 'quotactl', ...args], { cwd: consumerDir, env: consumerEnv(), timeoutMs: RUN_TIMEOUT_MS });
      const help = await npx(['--help']);
      expect(help.code, help.stderr).toBe(0);
      expect(help.stdout).toMatch(/^Usage: quotactl \[options\] \[command\]/);
      const allow = await npx(['--addr', address, '--json', 'allow', 'orders', 'user=packaging-quotactl']);
      expect(allow.code, allow.stderr).toBe(0);
      expect(JSON.parse(allow.stdout)).toMatchObject({
        policy: 'orders',
        allowed: true,
        source: 'store',
        limits: [{ name: 'orders', limit: 10, remaining: 9 }],
      });
      const policies = await npx(['--addr', address, 'policies']);
      expect(policies.code, policies.stderr).toBe(0);
      expect(policies.stdout).toMatch(/^orders\s+orders\s+user\s+token_bucket/m);
      // health loads grpc/health/v1/health.proto from the installed @quota-service/contract's proto/.
      const health = await npx(['--addr', address, '--json', 'health', '--service', '']);
      expect(health.code, health.stderr).toBe(0);
      expect(JSON.parse(health.stdout)).toEqual({ services: [{ service: '', status: 'SERVING' }] });
    },
    TEST_TIMEOUT_MS,
  );

  it(
    '`npx quotactl` from the repository root runs the built workspace package',
    async () => {
      // The pack built each package's dist in place (prepack), as `make build` does.
      const version = JSON.parse(await readFile(join(REPO_ROOT, 'clients', 'quotactl', 'package.json'), 'utf8')) as { version: string };
      const run = await runChild('npx', ['--no-install', 'quotactl', '--version'], { cwd: REPO_ROOT, env: consumerEnv(), timeoutMs: RUN_TIMEOUT_MS });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout.trim()).toBe(version.version);
      const validate = await runChild('npx', ['--no-install', 'quotactl', 'validate', 'config/policies.yaml'], {
        cwd: REPO_ROOT,
        env: consumerEnv(),
        timeoutMs: RUN_TIMEOUT_MS,
      });
      expect(validate.code, validate.stderr).toBe(0);
    },
    TEST_TIMEOUT_MS,
  );

  it('the consumer program imports packages by name only', async () => {
    const manifest = JSON.parse(await readFile(join(consumerDir, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const sources = join(import.meta.dirname, 'consumer');
    for (const file of (await readdir(sources)).filter((f) => f.endsWith('.mjs'))) {
      for (const specifier of importSpecifiers(await readFile(join(sources, file), 'utf8'))) {
        if (isBuiltin(specifier) || (specifier.startsWith('./') && !specifier.includes('..'))) continue;
        expect(Object.keys(manifest.dependencies), `${file} imports ${specifier}`).toContain(packageName(specifier));
      }
    }
  });
});

// Each entry point, quotactl and the consumer program on the machine's Node and on Node 22.
describeInstalledRuntimes(() => ({ consumerDir, env: consumerEnv(), address }));

// The READMEs' install commands and quick starts, on the same tarballs and service.
describeReadmeInstall(() => ({ work: work!, address }));
