import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { type OwnedChild, own } from '../../test/support/owned-child.js';

/** bench/ab/caller.mjs, as copied into each built revision (so it imports that revision's quota client). */
export const CALLER = 'ab-caller.mjs';

/** What the caller prints at the end of a step. */
export interface StreamResult {
  concurrency: number;
  decisionsPerSecond: number;
  p50Ms: number;
  callerCpuUs: number;
  calls: number;
}

/**
 * A revision's quota client in a process of its own (caller.mjs), up for the
 * whole run so its client stays warm, measuring one step when asked.
 */
export class StreamCaller {
  private readonly child: ChildProcess;
  private readonly owned: OwnedChild;
  private readonly lines: AsyncIterator<string>;
  private readonly exited: Promise<number | null>;

  constructor(
    private readonly revisionName: string,
    revisionDir: string,
    port: number,
  ) {
    this.child = spawn(process.execPath, [join(revisionDir, CALLER), String(port)], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.owned = own(this.child);
    this.exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.lines = createInterface({ input: this.child.stdout! })[Symbol.asyncIterator]();
  }

  /**
   * One step: a closed loop at `concurrency` for `seconds` after its warm-up.
   * `measuring` runs as its measured seconds start (to sample other processes' CPU).
   */
  async measure(concurrency: number, seconds: number, measuring: () => Promise<void>): Promise<StreamResult> {
    this.child.stdin!.write(`${concurrency} ${seconds}\n`);
    await this.nextLine();
    await measuring();
    return JSON.parse(await this.nextLine()) as StreamResult;
  }

  /** Ends its stdin, so it closes its client and exits; stopped if it has not within 3 s. */
  async close(): Promise<void> {
    this.child.stdin!.end();
    const timer = setTimeout(() => void this.owned.stop(3_000), 3_000);
    await this.owned.exited;
    clearTimeout(timer);
  }

  private async nextLine(): Promise<string> {
    const { value, done } = await this.lines.next();
    if (done === true) throw new Error(`the caller of ${this.revisionName} exited with ${String(await this.exited)}`);
    return value as string;
  }
}
