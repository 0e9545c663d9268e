import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { node22Binary } from './node22.js';
import { CLIENT_README, REPO_ROOT } from './pack-clients.js';
import { readmeBlock } from './readme-blocks.js';
import { npmEnv, runChild } from './run-child.js';

// The install and quick starts of the client and http READMEs, run as a user runs them:
// the pack command in the repository, then the install command and each quick start
// (TypeScript compiled by tsc, and plain JavaScript) in a project of its own outside the
// repository, beside a folder named quota-service that is the checkout, as the READMEs
// assume. Each quick start runs on this machine's Node and on Node 22, against a real
// quota service. Every command comes from the README's marked blocks, word for word.

const SETUP_TIMEOUT_MS = 300_000;
const TEST_TIMEOUT_MS = 240_000;

const README = {
  client: join(REPO_ROOT, 'clients', 'quota-client', 'README.md'),
  http: join(REPO_ROOT, 'clients', 'http', 'README.md'),
} as const;

/** What packaging.test.ts set up: the folder the projects go in, and a real service's address. */
export interface ReadmeContext {
  work: string;
  address: string;
}

let context: () => ReadmeContext;
let work: string;
let address: string;

/**
 * The README tests, registered in packaging.test.ts: it packs with the READMEs' pack
 * command (once, for every packaging test: two packs at once would rebuild the same
 * dist folders) and starts the service. `work` gets a folder named quota-service that
 * is the checkout, where the READMEs' install commands look for it.
 */
export function describeReadmeInstall(setup: () => ReadmeContext): void {
  context = setup;
  beforeAll(async () => {
    ({ work, address } = context());
    await symlink(REPO_ROOT, join(work, 'quota-service'));
    // Every package README packs the same way.
    for (const readme of Object.values(README)) expect(readmeBlock(readme, 'pack')).toBe(readmeBlock(CLIENT_README, 'pack'));
  });
  describeClient();
  describeHttp();
}

const RUNTIMES = [
  { runtime: `the local Node ${process.version}`, binary: () => process.execPath, major: process.versions.node.split('.')[0]! },
  { runtime: 'Node 22', binary: node22Binary, major: '22' },
];

/** The user's shell: `node` on PATH is the runtime under test; the service's address; nothing else of the test's. */
function userEnv(nodeBinary: string): NodeJS.ProcessEnv {
  return { ...npmEnv(), PATH: `${dirname(nodeBinary)}${delimiter}${process.env.PATH}`, QUOTA_ADDRESS: address };
}

/** A fresh project folder beside the checkout, with the package.json `npm init -y` writes. */
async function newProject(name: string): Promise<string> {
  const dir = join(work, name);
  await mkdir(dir);
  await writeFile(join(dir, 'package.json'), `${JSON.stringify({ name, version: '1.0.0', private: true }, null, 2)}\n`);
  return dir;
}

async function shell(block: string, cwd: string, env: NodeJS.ProcessEnv) {
  const result = await runChild('bash', ['-euo', 'pipefail', '-c', block], { cwd, env, timeoutMs: 180_000 });
  expect(result.code, `${block}\nexited ${result.code}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`).toBe(0);
  return result;
}

async function nodeMajor(env: NodeJS.ProcessEnv, cwd: string): Promise<string> {
  const { stdout } = await shell('node --version', cwd, env);
  return stdout.trim().replace(/^v(\d+)\..*$/, '$1');
}

function describeClient(): void {
  describe('@quota-service/client README', () => {
    let project: string;
    beforeAll(async () => {
      project = await newProject('client-app');
      await shell(readmeBlock(README.client, 'client install'), project, userEnv(process.execPath));
    }, SETUP_TIMEOUT_MS);

    it('installs from the packed tarballs outside the repository', () => {
      expect(existsSync(join(project, 'node_modules', '@quota-service', 'client', 'dist', 'index.js'))).toBe(true);
    });

    for (const { runtime, binary, major } of RUNTIMES) {
      for (const language of ['ts', 'js'] as const) {
        it(
          `the ${language === 'ts' ? 'TypeScript' : 'JavaScript'} quick start runs as written on ${runtime}`,
          async () => {
            const env = userEnv(binary());
            expect(await nodeMajor(env, project)).toBe(major);
            const file = language === 'ts' ? 'quickstart.mts' : 'quickstart.mjs';
            await writeFile(join(project, file), readmeBlock(README.client, `client ${file}`));
            const { stdout } = await shell(readmeBlock(README.client, `client ${language} run`), project, env);
            expect(stdout).toMatch(/^allowed \(source: store\)$/m);
          },
          TEST_TIMEOUT_MS,
        );
      }
    }
  });
}

/** Runs a block that ends in a server, in its own process group so that it and node stop together. */
function startServerBlock(block: string, cwd: string, env: NodeJS.ProcessEnv) {
  const child: ChildProcess = spawn('bash', ['-euo', 'pipefail', '-c', block], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const listening = new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', () => {
      const match = /listening on (http:\/\/\S+)/.exec(stdout);
      if (match !== null) resolve(match[1]!);
    });
    void exited.then((code) => reject(new Error(`exited ${code} before listening\nstdout:\n${stdout}\nstderr:\n${stderr}`)));
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      process.kill(-child.pid!, 'SIGTERM');
      const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
  };
  return { listening, stop, output: () => ({ stdout, stderr }) };
}

function describeHttp(): void {
  describe('@quota-service/http README', () => {
    let project: string;
    beforeAll(async () => {
      project = await newProject('http-app');
      await shell(readmeBlock(README.http, 'http install'), project, userEnv(process.execPath));
    }, SETUP_TIMEOUT_MS);

    let port = 18_480 + Math.floor(Math.random() * 1000);
    for (const { runtime, binary, major } of RUNTIMES) {
      for (const language of ['ts', 'js'] as const) {
        it(
          `the Express ${language === 'ts' ? 'TypeScript' : 'JavaScript'} quick start serves 201s, then a 429 with Retry-After, on ${runtime}`,
          async () => {
            const env = { ...userEnv(binary()), PORT: String(port++) };
            expect(await nodeMajor(env, project)).toBe(major);
            const file = language === 'ts' ? 'quickstart.mts' : 'quickstart.mjs';
            await writeFile(join(project, file), readmeBlock(README.http, `http ${file}`));
            const server = startServerBlock(readmeBlock(README.http, `http ${language} run`), project, env);
            try {
              const base = await server.listening;
              expect((await fetch(`${base}/api/orders`, { method: 'POST' })).status).toBe(401);
              const statuses: number[] = [];
              let denial: Response | undefined;
              // The user's bucket holds 10 and refills 2 per second: a quick run of requests empties it.
              // The TypeScript runs order as alice, the JavaScript runs as bob: a user's next run comes
              // after another run's install and compile, long enough for the bucket to refill.
              const token = language === 'ts' ? 'token-alice' : 'token-bob';
              for (let i = 0; i < 30 && denial === undefined; i++) {
                const response = await fetch(`${base}/api/orders`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
                statuses.push(response.status);
                if (response.status === 429) denial = response;
                else await response.arrayBuffer();
              }
              expect(statuses, JSON.stringify(server.output())).toContain(201);
              expect(denial, `statuses ${statuses.join(' ')}`).toBeDefined();
              expect(Number(denial!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
              expect(await denial!.json()).toMatchObject({ error: 'rate_limit_exceeded', policy: 'orders', limit: 'orders' });
            } finally {
              await server.stop();
            }
          },
          TEST_TIMEOUT_MS,
        );
      }
    }
  });
}
