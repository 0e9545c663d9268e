/**
 * Garbage collection per phase of a child run with V8's `--trace-gc-nvp`: the
 * child prints `gc-phase-start <name>` and `gc-phase-end <name> <decisions>`
 * around the part it measures, and V8 prints one name=value line per GC. How
 * many bytes a scavenge promoted to old space is only in that trace (no Node
 * API tells it), and promoted bytes are the garbage a mark-compact must later
 * reclaim: objects of one decision that outlive a scavenge.
 */
export interface PhaseGc {
  phase: string;
  decisions: number;
  scavenges: number;
  /** Bytes allocated, as V8 counts them from GC to GC. */
  allocatedBytes: number;
  promotedBytes: number;
  scavengeMs: number;
  /** Mark-compacts (and any other full GC) during the phase. */
  fullGcs: number;
}

const PHASE = /^gc-phase-(start|end) (\S+)(?: (\d+))?$/;

/** The phases of `output` with their GC; `rest` is the output without the trace and marker lines. */
export function gcPerPhase(output: string): { phases: PhaseGc[]; rest: string } {
  const phases: PhaseGc[] = [];
  const rest: string[] = [];
  let current: PhaseGc | undefined;
  for (const line of output.split('\n')) {
    const marker = PHASE.exec(line);
    if (marker !== null) {
      if (marker[1] === 'start') current = { phase: marker[2]!, decisions: 0, scavenges: 0, allocatedBytes: 0, promotedBytes: 0, scavengeMs: 0, fullGcs: 0 };
      else if (current !== undefined) {
        current.decisions = Number(marker[3]);
        phases.push(current);
        current = undefined;
      }
      continue;
    }
    const kind = / gc=(\S+) /.exec(line)?.[1];
    if (kind === undefined) {
      rest.push(line);
      continue;
    }
    if (current === undefined) continue;
    current.allocatedBytes += Number(/ allocated=(\d+)/.exec(line)?.[1] ?? 0);
    if (kind === 's') {
      current.scavenges++;
      current.promotedBytes += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
      current.scavengeMs += Number(/ pause=([\d.]+)/.exec(line)?.[1] ?? 0);
    } else {
      current.fullGcs++;
    }
  }
  return { phases, rest: rest.join('\n') };
}

/** One line per phase, per 10,000 decisions. */
export function formatPhaseGc({ phase, decisions, scavenges, allocatedBytes, promotedBytes, scavengeMs, fullGcs }: PhaseGc): string {
  const per10k = 10_000 / decisions;
  return (
    `${phase}: ${(allocatedBytes / decisions).toFixed(0)} bytes allocated per decision; per 10k decisions ` +
    `${(scavenges * per10k).toFixed(1)} scavenges (${(scavengeMs * per10k).toFixed(1)} ms), ` +
    `${((promotedBytes / 2 ** 20) * per10k).toFixed(3)} MB promoted to old space, ${(fullGcs * per10k).toFixed(2)} full GCs`
  );
}
