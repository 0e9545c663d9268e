import { defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';

/** The workspace packages (@quota-service/*) resolve to their TypeScript sources: tests need no build. */
const SOURCE_CONDITION = '@quota-service/source';

export default defineConfig({
  ssr: { resolve: { conditions: [SOURCE_CONDITION, ...defaultServerConditions] } },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Each test file starts its own Redis processes, so files run in parallel safely.
    pool: 'forks',
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
