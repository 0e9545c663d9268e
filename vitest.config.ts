import { availableParallelism } from 'node:os';
import { defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';

/** The workspace packages (@quota-service/*) resolve to their TypeScript sources: tests need no build. */
const SOURCE_CONDITION = '@quota-service/source';

/**
 * Tests that judge how fast a service answers while a fault lasts (a partition,
 * a stall, a starved CPU, a hung store), and property tests whose Redis keys
 * expire on Redis's real clock within milliseconds of the virtual time they
 * compare at: they run after the others, one file at a time, so that the rest
 * of the suite does not take their CPU.
 */
const TIMING = [
  'test/faults/**/*.test.ts',
  'test/grpc/get-quota-outage.test.ts',
  'test/engine/failure-outage.test.ts',
  'test/api/envoy/rls-store-failure.test.ts',
  'test/api/envoy/rls-cold-start.test.ts',
  'test/api/envoy/rls-deadline.test.ts',
  'test/settle/reserve-settle-property.test.ts',
  // Virtual time on a real Redis, whose keys expire on its own clock: a stall of the test process
  // within one step can let Redis expire a key early (a bucket's, while it is nearly full). Such a
  // run is run again; here, where stalls are fewest, that is rare.
  'test/slices/never-over-grant.test.ts',
  // The benchmarks' pacer judged by when its calls reach a server in the test process: that
  // process must get a core when they come.
  'test/bench/h2pace.test.ts',
];

export default defineConfig({
  ssr: { resolve: { conditions: [SOURCE_CONDITION, ...defaultServerConditions] } },
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Each test file starts its own Redis processes, so files run in parallel safely.
    pool: 'forks',
    // Most files wait on the processes they start (Redis, services, clients), not on the
    // CPU: more files at once than cores (vitest's default is one less than the cores).
    maxWorkers: Math.max(3, availableParallelism()),
    reporters: ['default', './test/support/summary-reporter.ts'],
    projects: [
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: TIMING, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'timing', include: TIMING, fileParallelism: false, sequence: { groupOrder: 1 } } },
    ],
  },
});
