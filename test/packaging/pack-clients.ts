import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { readmeBlock } from './readme-blocks.js';
import { npmEnv, runOk } from './run-child.js';

/** The publishable packages, in build order: each one's prepack compiles against the dist of those before it. */
export const CLIENT_PACKAGES = [
  '@quota-service/contract',
  '@quota-service/core',
  '@quota-service/client',
  '@quota-service/quotactl',
  '@quota-service/http',
  '@quota-service/mcp',
] as const;

export const REPO_ROOT = join(import.meta.dirname, '..', '..');

export interface PackedPackage {
  name: string;
  /** Absolute path of the .tgz. */
  tarball: string;
  /** Compressed size in bytes. */
  size: number;
  /** Paths inside the package, as npm packed them. */
  files: string[];
}

/** The folder `npm run pack:clients` writes the tarballs into, as the READMEs say. */
export const PACKAGES_DIR = join(REPO_ROOT, 'packages');

/** The README that says how to pack (every package README's pack block is the same). */
export const CLIENT_README = join(REPO_ROOT, 'clients', 'quota-client', 'README.md');

/**
 * Packs every client package as the READMEs say: their pack block, run word for word
 * in the repository (`npm run pack:clients`, which packs in CLIENT_PACKAGES order, so
 * each prepack finds its dependencies' dist), then what it wrote into packages/.
 */
export async function packAsReadmeSays(): Promise<PackedPackage[]> {
  await runOk('bash', ['-euo', 'pipefail', '-c', readmeBlock(CLIENT_README, 'pack')], { cwd: REPO_ROOT, env: npmEnv(), timeoutMs: 240_000 });
  const packed: PackedPackage[] = [];
  for (const file of (await readdir(PACKAGES_DIR)).filter((f) => f.endsWith('.tgz'))) {
    const tarball = join(PACKAGES_DIR, file);
    const { stdout: manifest } = await runOk('tar', ['-xzOf', tarball, 'package/package.json'], { cwd: REPO_ROOT, env: process.env, timeoutMs: 30_000 });
    const { stdout: listing } = await runOk('tar', ['-tzf', tarball], { cwd: REPO_ROOT, env: process.env, timeoutMs: 30_000 });
    packed.push({
      name: (JSON.parse(manifest) as { name: string }).name,
      tarball,
      size: (await stat(tarball)).size,
      files: listing
        .split('\n')
        .filter((line) => line !== '' && !line.endsWith('/'))
        .map((line) => line.replace(/^package\//, '')),
    });
  }
  const order = (name: string) => CLIENT_PACKAGES.indexOf(name as (typeof CLIENT_PACKAGES)[number]);
  packed.sort((a, b) => order(a.name) - order(b.name));
  const names = packed.map((p) => p.name);
  if (names.join() !== CLIENT_PACKAGES.join()) throw new Error(`npm run pack:clients wrote ${names.join(', ')}, expected ${CLIENT_PACKAGES.join(', ')}`);
  return packed;
}
