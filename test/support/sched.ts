import { readFileSync } from 'node:fs';

/**
 * What the kernel's scheduler counted for one thread (Linux): time on a CPU,
 * time runnable but waiting for a CPU (the run queue), and how often it went
 * to sleep by itself (voluntary context switches: an event loop waiting for
 * its next event). Each sleep is a wake-up later, and a wake-up is where a
 * loopback hop spends its time beyond the CPU: the wait for a core.
 */
export interface SchedSample {
  onCpuUs: number;
  waitUs: number;
  sleeps: number;
}

/** The thread `tid` of process `pid` (its main thread by default), or undefined where /proc has no such figures. */
export function sampleSched(pid: number, tid = pid): SchedSample | undefined {
  try {
    const [onCpuNs, waitNs] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number);
    const sleeps = /^voluntary_ctxt_switches:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))?.[1];
    if (onCpuNs === undefined || waitNs === undefined || sleeps === undefined) return undefined;
    return { onCpuUs: onCpuNs / 1000, waitUs: waitNs / 1000, sleeps: Number(sleeps) };
  } catch {
    return undefined;
  }
}
