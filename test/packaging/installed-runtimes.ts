import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { node22Binary } from './node22.js';
import { RUN_TIMEOUT_MS, runChild, TEST_TIMEOUT_MS } from './run-child.js';

/** Where the packed packages are installed, and the service they call. */
export interface InstalledContext {
  /** The consumer project, with every package installed from its tarball. */
  consumerDir: string;
  /** Its environment: nothing inherited beyond PATH and HOME, and the service's address. */
  env: NodeJS.ProcessEnv;
  /** host:port of the quota service. */
  address: string;
}

/** What each entry point must export: proof it loaded, not just resolved. */
const ENTRY_POINTS: readonly [string, string][] = [
  ['@quota-service/contract', 'QuotaServiceDefinition'],
  ['@quota-service/core', 'parsePolicies'],
  ['@quota-service/client', 'createQuotaClient'],
  ['@quota-service/quotactl', 'runQuotactl'],
  ['@quota-service/http', 'rateLimitCheck'],
  ['@quota-service/http/express', 'expressRateLimit'],
  ['@quota-service/http/fastify', 'fastifyRateLimit'],
  ['@quota-service/mcp', 'guardTools'],
  ['@quota-service/mcp/v2', 'guardTools'],
];

const RUNTIMES = [
  { runtime: `the local Node ${process.version}`, binary: () => process.execPath, major: process.versions.node.split('.')[0]! },
  // Resolved inside the tests: without it they fail (with how to install it); they never skip.
  { runtime: 'Node 22', binary: node22Binary, major: '22' },
];

/**
 * The installed packages run, registered in packaging.test.ts (which packs,
 * installs and starts the service once for all of its tests): each entry point
 * imports by name, quotactl decides, and the consumer program passes, on the
 * machine's Node and on Node 22. `context` is read inside the tests, once the
 * setup has run.
 */
export function describeInstalledRuntimes(context: () => InstalledContext): void {
  for (const { runtime, binary, major } of RUNTIMES) {
    describe(`on ${runtime}`, () => {
      it(
        'each package and subpath imports by name in the consumer project (no server file needed)',
        async () => {
          const node = binary();
          const { consumerDir, env } = context();
          const results = await Promise.all(
            ENTRY_POINTS.map(([specifier]) =>
              runChild(node, ['-e', 'import(process.argv[1]).then((m) => console.log(Object.keys(m).join(" ")))', specifier], {
                cwd: consumerDir,
                env,
                timeoutMs: RUN_TIMEOUT_MS,
              }),
            ),
          );
          ENTRY_POINTS.forEach(([specifier, expected], i) => {
            const { code, stdout, stderr } = results[i]!;
            expect(code, `import('${specifier}') failed:\n${stderr}`).toBe(0);
            expect(stdout.trim().split(' '), `exports of ${specifier}`).toContain(expected);
          });
        },
        TEST_TIMEOUT_MS,
      );

      it(
        'runs the installed quotactl: a real decision, and its exit status',
        async () => {
          const { consumerDir, env, address } = context();
          const bin = join(consumerDir, 'node_modules', '.bin', 'quotactl');
          // The whole bucket (10, refilling 2/s), then the whole bucket again: denied unless 5 s passed in between.
          const allowed = await runChild(binary(), [bin, '--addr', address, '--json', 'allow', 'orders', `user=quotactl-node${major}`, '--cost', '10'], {
            cwd: consumerDir,
            env,
            timeoutMs: RUN_TIMEOUT_MS,
          });
          expect(allowed.code, allowed.stderr).toBe(0);
          expect(JSON.parse(allowed.stdout)).toMatchObject({ allowed: true });
          const denied = await runChild(binary(), [bin, '--addr', address, 'allow', 'orders', `user=quotactl-node${major}`, '--cost', '10'], {
            cwd: consumerDir,
            env,
            timeoutMs: RUN_TIMEOUT_MS,
          });
          expect(denied.code, denied.stderr).toBe(1);
          expect(denied.stdout).toMatch(/^denied orders /);
        },
        TEST_TIMEOUT_MS,
      );

      it(
        'runs the consumer: quota client, Express and Fastify 429s, a guarded MCP tool on SDK 1.x and 2.x, against a real service',
        async () => {
          const { consumerDir, env } = context();
          const { code, stdout, stderr } = await runChild(binary(), ['main.mjs'], {
            cwd: consumerDir,
            env,
            timeoutMs: RUN_TIMEOUT_MS,
          });
          const shown = `exit ${code}\nstdout:\n${stdout}\nstderr:\n${stderr}`;
          expect(stdout, shown).toMatch(new RegExp(`^consumer: node v${major}\\.`, 'm'));
          expect(stdout.trim().split('\n').at(-1), shown).toBe('consumer: all checks passed');
          expect(code, shown).toBe(0);
        },
        TEST_TIMEOUT_MS,
      );
    });
  }
}
