// `make bench`: what each package weighs as npm would publish it, from the
// builds `make build` just made (--ignore-scripts: no rebuild in prepack).
//
//   npx tsx bench/sizes.ts
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const PACKAGES = ['@quota-service/contract', '@quota-service/core', '@quota-service/client', '@quota-service/http', '@quota-service/mcp'];

interface PackInfo {
  name: string;
  size: number;
  unpackedSize: number;
  entryCount: number;
}

const rows: string[] = [];
for (const name of PACKAGES) {
  const { stdout } = await promisify(execFile)('npm', ['pack', '-w', name, '--dry-run', '--json', '--ignore-scripts'], { maxBuffer: 16 * 2 ** 20 });
  const [info] = JSON.parse(stdout) as PackInfo[];
  if (info === undefined) throw new Error(`npm pack -w ${name}: no package in its answer`);
  rows.push(`| \`${info.name}\` | ${(info.size / 1000).toFixed(1)} kB | ${Math.round(info.unpackedSize / 1000)} kB | ${info.entryCount} |`);
}
process.stdout.write(
  `npm pack -w <package> --dry-run --json --ignore-scripts, after make build; node ${process.version}\n\n` +
    `| package | packed | unpacked | files |\n|---|---:|---:|---:|\n${rows.join('\n')}\n`,
);
