import { copyFile, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { REPO_ROOT, type PackedPackage } from './pack-clients.js';
import { npmEnv, runOk } from './run-child.js';

/** The peers the consumer installs beside the tarballs: what the adapters and the MCP guard (both SDK lines) plug into. */
const PEERS = ['express', 'fastify', '@modelcontextprotocol/sdk', '@modelcontextprotocol/server', '@modelcontextprotocol/client'] as const;

const CONSUMER_SOURCES = join(import.meta.dirname, 'consumer');

/** The version of `name` the repository's own tests run against (its node_modules). */
async function repoVersion(name: string): Promise<string> {
  const manifest = JSON.parse(await readFile(join(REPO_ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string };
  return manifest.version;
}

/**
 * A project of its own in `dir` (outside the repository): package.json depending on
 * the tarballs (file:) and on the peers at the repository's versions (reproducible,
 * and in the npm cache already), installed by a plain `npm install` into its own
 * node_modules; then the consumer program (consumer/*.mjs) copied in.
 */
export async function createConsumerProject(dir: string, packed: readonly PackedPackage[]): Promise<void> {
  const dependencies: Record<string, string> = {};
  for (const p of packed) dependencies[p.name] = `file:${p.tarball}`;
  for (const peer of PEERS) dependencies[peer] = await repoVersion(peer);
  await installProject(dir, 'quota-service-packaging-consumer', dependencies);
  for (const file of await readdir(CONSUMER_SOURCES)) {
    if (file.endsWith('.mjs')) await copyFile(join(CONSUMER_SOURCES, file), join(dir, file));
  }
}

/**
 * A project in `dir` that installs only the tarballs named in `names` (and what they
 * depend on): what a service that wants one package gets in its node_modules.
 */
export async function createProjectWith(dir: string, packed: readonly PackedPackage[], names: readonly string[]): Promise<void> {
  const dependencies: Record<string, string> = {};
  for (const name of names) {
    const p = packed.find((candidate) => candidate.name === name);
    if (p === undefined) throw new Error(`${name} was not packed`);
    dependencies[name] = `file:${p.tarball}`;
  }
  await installProject(dir, 'quota-service-packaging-project', dependencies);
}

async function installProject(dir: string, name: string, dependencies: Record<string, string>): Promise<void> {
  await mkdir(dir, { recursive: true });
  const manifest = { name, version: '1.0.0', private: true, type: 'module', dependencies };
  await writeFile(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await runOk('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir, env: npmEnv(), timeoutMs: 180_000 });
}
