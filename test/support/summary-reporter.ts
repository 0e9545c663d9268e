import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends the run with one plain line, "tests: N passed, N failed, N skipped",
 * which CI reads to tell a run that tested something from one that did not.
 * A file that failed outside its tests (an import or a hook threw) adds
 * ", N files failed": its tests never ran, so the counts alone would look clean.
 *
 * Tests that skip themselves because this machine cannot run them (no network
 * namespaces without root, say) give the reason in their name, as
 * "(skipped: <reason>)", or as ctx.skip's note: each reason is printed on a
 * line of its own just before the summary, so a skip is never silent.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const reasons = new Map<string, number>();
    const brokenFiles = testModules.filter((module) => module.errors().length > 0).length;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const result = test.result();
        if (result.state === 'passed') counts.passed++;
        else if (result.state === 'failed') counts.failed++;
        else {
          counts.skipped++;
          const reason = (result.state === 'skipped' ? result.note : undefined) ?? /\(skipped: (.+?)\)(?= > |$)/.exec(test.fullName)?.[1];
          if (reason !== undefined) reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
        }
      }
    }
    const files = brokenFiles > 0 ? `, ${brokenFiles} files failed` : '';
    const why = [...reasons].map(([reason, n]) => `skipped ${n} ${n === 1 ? 'test' : 'tests'}: ${reason}\n`).join('');
    process.stdout.write(`\n${why}tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped${files}\n`);
  }
}
