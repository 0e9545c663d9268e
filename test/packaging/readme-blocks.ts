import { readFileSync } from 'node:fs';

/**
 * The fenced block that follows `<!-- readme-test: <name> -->` in a README: the text a
 * user copies. The README test runs these blocks as they are written, so what the
 * README says is what the test does.
 */
export function readmeBlock(readme: string, name: string): string {
  const text = readFileSync(readme, 'utf8');
  const marker = `<!-- readme-test: ${name} -->`;
  const at = text.indexOf(marker);
  if (at === -1) throw new Error(`${readme} has no block marked '${marker}'`);
  const match = /^\s*```[a-z]*\n([\s\S]*?)^```/m.exec(text.slice(at + marker.length));
  if (match === null) throw new Error(`${readme}: no fenced block after '${marker}'`);
  return match[1]!;
}
