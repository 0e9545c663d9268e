import type { SchedSample } from '../test/support/sched.js';

/** `after` less `before`, divided by `per` (e.g. the decisions made in between); undefined if either is. */
export function schedPer(before: SchedSample | undefined, after: SchedSample | undefined, per: number): SchedSample | undefined {
  if (before === undefined || after === undefined) return undefined;
  return {
    onCpuUs: (after.onCpuUs - before.onCpuUs) / per,
    waitUs: (after.waitUs - before.waitUs) / per,
    sleeps: (after.sleeps - before.sleeps) / per,
  };
}
