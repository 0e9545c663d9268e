import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Each test file starts its own Redis processes, so files run in parallel safely.
    pool: 'forks',
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
