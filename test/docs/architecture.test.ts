import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const PAGE = 'docs/architecture.md';

/** Every path of the repository the page names: src/…, clients/…, test/…, in backticks or in its picture. */
function namedPaths(text: string): string[] {
  const paths = new Set<string>();
  for (const match of text.matchAll(/(?:^|[\s`(])((?:src|clients|test)\/[\w./-]*[\w/])/gm)) {
    const path = match[1]!.replace(/\/$/, '');
    // A placeholder (`src/api/<door>/`) names a kind of folder, not one.
    if (!path.includes('<')) paths.add(path);
  }
  return [...paths].sort();
}

describe('docs/architecture.md', () => {
  const text = readFileSync(PAGE, 'utf8');

  it('names the floors and the three doors', () => {
    const named = namedPaths(text);
    for (const floor of ['src/api/quota', 'src/api/envoy', 'src/api/admin', 'src/grpc', 'src/engine', 'src/store', 'src/store/redis', 'clients/core']) {
      expect(named).toContain(floor);
    }
  });

  it('names only folders and files that exist', () => {
    const missing = namedPaths(text).filter((path) => !existsSync(path));
    expect(missing, `${PAGE} names paths that are gone`).toEqual([]);
  });
});
