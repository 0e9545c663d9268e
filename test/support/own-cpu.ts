import { setPriority } from 'node:os';

/**
 * Raises a process's CPU priority where permitted (root): Redis and the fault
 * proxy stand for another host and the network, which have CPUs of their own;
 * on a shared, busy test machine a starved Redis would be a fault nobody asked for.
 */
export function asIfOnItsOwnHost(pid: number): void {
  try {
    setPriority(pid, -10);
  } catch {
    // Not permitted: the figures then include this machine's contention.
  }
}
