import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
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

interface NpmPackEntry {
  name: string;
  filename: string;
  size: number;
  files: { path: string }[];
}

/**
 * `npm pack` of every client package into `destination`, as a release would: one npm
 * run with the workspaces in CLIENT_PACKAGES order (npm packs them in the order
 * given), so each prepack (tsc -p tsconfig.build.json) finds its dependencies' dist.
 */
export async function packClients(destination: string): Promise<PackedPackage[]> {
  await mkdir(destination, { recursive: true });
  const workspaces = CLIENT_PACKAGES.flatMap((name) => ['-w', name]);
  const { stdout } = await runOk('npm', ['pack', ...workspaces, '--pack-destination', destination, '--json'], {
    cwd: REPO_ROOT,
    env: npmEnv(),
    timeoutMs: 180_000,
  });
  const entries = JSON.parse(stdout) as NpmPackEntry[];
  const packed = entries.map((entry) => ({
    name: entry.name,
    tarball: join(destination, entry.filename),
    size: entry.size,
    files: entry.files.map((file) => file.path),
  }));
  const names = packed.map((p) => p.name);
  if (names.join() !== CLIENT_PACKAGES.join()) throw new Error(`npm pack produced ${names.join(', ')}, expected ${CLIENT_PACKAGES.join(', ')}`);
  return packed;
}
