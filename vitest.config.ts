import { defineConfig } from 'vitest/config';

/** The workspace packages (@quota-service/*) resolve to their TypeScript sources: tests need no build. */
const SOURCE_CONDITION = '@quota-service/source';

export default defineConfig({
  resolve: { conditions: [SOURCE_CONDITION, 'module', 'node', 'import', 'default'] },
  ssr: { resolve: { conditions: [SOURCE_CONDITION, 'module', 'node', 'import', 'default'] } },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Each test file starts its own Redis processes, so files run in parallel safely.
    pool: 'forks',
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
