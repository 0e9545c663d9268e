import { builtinModules } from 'node:module';

/**
 * The module specifiers a JavaScript or declaration file names: static imports and
 * re-exports, side-effect imports, import() and the import("...") types tsc writes
 * into .d.ts files. A regex, not a parser: enough for tsc output and our .mjs files.
 */
export function importSpecifiers(text: string): string[] {
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(['"])([^'"]+)\1/gm;
  return [...text.matchAll(pattern)].map((match) => match[2]!);
}

/** The package a bare specifier names ('@scope/name/sub/path' -> '@scope/name'). */
export function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

export const isBuiltin = (specifier: string) => specifier.startsWith('node:') || builtinModules.includes(specifier);
export const isRelative = (specifier: string) => specifier.startsWith('./') || specifier.startsWith('../');
