import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const NODE_MODULES = fileURLToPath(new URL('../node_modules', import.meta.url));

/** The installed version of each package (from its package.json), for the report to name what it compared. */
export function packageVersions(names: readonly string[]): Record<string, string> {
  const versions: Record<string, string> = {};
  for (const name of names) {
    try {
      versions[name] = (JSON.parse(readFileSync(join(NODE_MODULES, name, 'package.json'), 'utf8')) as { version: string }).version;
    } catch {
      versions[name] = 'unknown';
    }
  }
  return versions;
}
