import type { Step } from './results.js';

/** The line under every section: which command measured it, when, for how long, on what, beside what. */
export function measuredLine(step: Step): string {
  const m = step.machine;
  const when = `${step.startedAt.slice(0, 10)} ${step.startedAt.slice(11, 16)} UTC`;
  const note = m.note === '' ? '' : `; ${m.note}`;
  return (
    `Measured by \`${step.target}\` on ${when} (${step.seconds} s), as \`${step.command}\`. ` +
    `Machine: ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, ${m.os}, Node ${m.node}, Redis ${m.redis}; ` +
    `load average ${m.loadAverage[0].toFixed(2)} at the start${note}.`
  );
}

/** What a section says when its bench has not run, or failed, instead of figures. */
export function missingOrFailed(step: Step | undefined, target: 'make bench' | 'make bench-quick'): string | undefined {
  if (step === undefined) return `Not measured yet: \`${target}\` measures it.`;
  if (step.exitCode === 0) return undefined;
  const tail = (step.errorOutput ?? '').split('\n').slice(-12).join('\n');
  return `${measuredLine(step)}\n\n**The bench failed (exit ${step.exitCode}); figures below, if any, are not trustworthy.**\n\n\`\`\`text\n${tail}\n\`\`\``;
}

/** A whole number with thousands separators: figures read faster that way. */
export function whole(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a';
}
