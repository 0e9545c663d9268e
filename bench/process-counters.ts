import { performance } from 'node:perf_hooks';
import { GCProfiler, getHeapStatistics } from 'node:v8';

/**
 * Two counts of this process, which the CPU breakdown takes before and after
 * its measured seconds and divides by the decisions made in between:
 * - loops: turns of the event loop since the process started (libuv's own
 *   count); a turn that finds nothing ready sleeps, so loops >= sleeps.
 * - allocatedBytes: bytes allocated on the JavaScript heap since the process
 *   first called readCounters (V8's used heap size as it grows between
 *   collections: what the collectors later have to sweep or copy). Buffers'
 *   memory outside the heap is not in it.
 */
export interface ProcessCounters {
  loops: number;
  allocatedBytes: number;
}

let profiler: GCProfiler | undefined;
let usedAtStart = 0;
let allocatedBytes = 0;

/**
 * The counts so far. V8's used heap size only grows between collections, so
 * the bytes allocated are its growth up to each collection (V8's GC profiler
 * records the size before and after every one) and since the last.
 */
export function readCounters(): ProcessCounters {
  const used = getHeapStatistics().used_heap_size;
  if (profiler !== undefined) {
    let previous = usedAtStart;
    for (const gc of profiler.stop().statistics) {
      allocatedBytes += gc.beforeGC.heapStatistics.usedHeapSize - previous;
      previous = gc.afterGC.heapStatistics.usedHeapSize;
    }
    allocatedBytes += used - previous;
  }
  usedAtStart = used;
  profiler = new GCProfiler();
  profiler.start();
  return { loops: performance.nodeTiming.uvMetricsInfo.loopCount, allocatedBytes };
}

/** `after` less `before`, divided by `per` (e.g. the decisions made in between). */
export function countersPer(before: ProcessCounters, after: ProcessCounters, per: number): ProcessCounters {
  return { loops: (after.loops - before.loops) / per, allocatedBytes: (after.allocatedBytes - before.allocatedBytes) / per };
}

/** The line a server child answers `counters` on its stdin with (bench/servers/lifecycle.ts). */
export function formatCounters({ loops, allocatedBytes }: ProcessCounters): string {
  return `counters loops=${loops} allocated=${allocatedBytes}`;
}

export function parseCounters(line: string): ProcessCounters | undefined {
  const match = /^counters loops=(\d+) allocated=(-?\d+)$/m.exec(line);
  return match === null ? undefined : { loops: Number(match[1]), allocatedBytes: Number(match[2]) };
}
