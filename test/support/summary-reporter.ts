import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends the run with one plain line, "tests: N passed, N failed, N skipped",
 * which CI reads to tell a run that tested something from one that did not.
 * A file that failed outside its tests (an import or a hook threw) adds
 * ", N files failed": its tests never ran, so the counts alone would look clean.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const brokenFiles = testModules.filter((module) => module.errors().length > 0).length;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') counts.failed++;
        else counts.skipped++;
      }
    }
    const files = brokenFiles > 0 ? `, ${brokenFiles} files failed` : '';
    process.stdout.write(`\ntests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped${files}\n`);
  }
}
