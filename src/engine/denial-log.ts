import { type DecisionSource, identityDigests } from '@quota-service/core';
import type { Logger } from '../logger.js';

/** The door a denial came through: the method's name. */
export type Door = 'Allow' | 'AllowBatch' | 'AllowStream' | 'ShouldRateLimit';

/** Lines a policy may write per second by default; the rest are counted, and the next line says how many. */
export const DENIAL_LINES_PER_SECOND = 10;

/** One policy's (or Envoy domain's) current second. */
interface Second {
  startMs: number;
  lines: number;
  /** Denials not written since the policy's last line. */
  suppressed: number;
}

/**
 * One info line per denial (`msg: "denied"`), so that one customer's 429s can
 * be found in the log: the policy, the limit that denied (`deniedBy`), where the
 * decision came from (`source`), the door, and the identity with each value
 * as its digest (valueDigest), never the value. A flood cannot drown the log:
 * at most `perSecond` lines per policy in any second; the denials past that
 * are counted, and the policy's next line carries the count (`suppressed`).
 * Called only for denials, so an allowed decision costs nothing here.
 */
export class DenialLog {
  private readonly seconds = new Map<string, Second>();

  constructor(
    private readonly logger: Logger,
    private readonly perSecond = DENIAL_LINES_PER_SECOND,
    private readonly nowMs: () => number = performance.now.bind(performance),
  ) {}

  denied(door: Door, policy: string, deniedBy: string, source: DecisionSource, identity: Readonly<Record<string, string>>): void {
    if (!this.logger.isLevelEnabled('info')) return;
    const now = this.nowMs();
    let second = this.seconds.get(policy);
    if (second === undefined) {
      second = { startMs: now, lines: 0, suppressed: 0 };
      this.seconds.set(policy, second);
    } else if (now - second.startMs >= 1_000) {
      second.startMs = now;
      second.lines = 0;
    }
    if (second.lines >= this.perSecond) {
      second.suppressed++;
      return;
    }
    second.lines++;
    const suppressed = second.suppressed;
    second.suppressed = 0;
    // The digests are computed only for a line written: a flood's suppressed denials cost a map lookup each.
    const fields = { policy, deniedBy, source, door, identity: identityDigests(identity) };
    this.logger.info(suppressed === 0 ? fields : { ...fields, suppressed }, 'denied');
  }
}
