import { readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { dirname, resolve } from 'node:path';

/**
 * The module specifiers a JavaScript or declaration file names: static imports and
 * re-exports, side-effect imports, import() and the import("...") types tsc writes
 * into .d.ts files. A regex, not a parser: enough for tsc output and our .mjs files.
 */
export function importSpecifiers(text: string, options: { dynamic?: boolean } = {}): string[] {
  const pattern =
    options.dynamic === false ? /(?:\bfrom\s*|^\s*import\s+)(['"])([^'"]+)\1/gm : /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(['"])([^'"]+)\1/gm;
  return [...text.matchAll(pattern)].map((match) => match[2]!);
}

/** The package a bare specifier names ('@scope/name/sub/path' -> '@scope/name'). */
export function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

export const isBuiltin = (specifier: string) => specifier.startsWith('node:') || builtinModules.includes(specifier);
export const isRelative = (specifier: string) => specifier.startsWith('./') || specifier.startsWith('../');

/**
 * The packages a dist file loads, itself and through the files it imports
 * relatively (a .d.ts's './x.js' is read as './x.d.ts'), sorted. With
 * `dynamic: false`, only what loads at once: import() is not followed.
 */
export async function packagesReached(entry: string, options: { dynamic?: boolean } = {}): Promise<string[]> {
  const types = entry.endsWith('.d.ts');
  const seen = new Set<string>();
  const packages = new Set<string>();
  const visit = async (file: string): Promise<void> => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of importSpecifiers(await readFile(file, 'utf8'), options)) {
      if (isRelative(specifier)) await visit(resolve(dirname(file), types ? specifier.replace(/\.js$/, '.d.ts') : specifier));
      else if (!isBuiltin(specifier)) packages.add(packageName(specifier));
    }
  };
  await visit(entry);
  return [...packages].sort();
}
