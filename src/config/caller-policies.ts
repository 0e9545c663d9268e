import type { Logger } from '../logger.js';
import type { CallerRegistry } from './callers.js';

/** What the service was doing when it compared the two files: the log line's `after`. */
export type CheckPoint = 'start' | 'callers reloaded' | 'policies reloaded';

/**
 * Compares the callers file's policy lists with the policy file. A caller allowed
 * a policy that does not exist is a typo or a policy removed since, and its calls
 * naming it get NOT_FOUND. Not a reason to refuse the file: the callers file and
 * the policy file reload independently (a Secret and a ConfigMap), so during a
 * rollout either may name a policy before the other has it. Instead, one warning
 * per such caller at start and after every reload of either file, and one line
 * when a reload has resolved them all.
 */
export class CallerPolicyCheck {
  private warned = false;

  constructor(private readonly logger: Logger) {}

  /** Logs each caller that may use policies `policies` lacks; returns how many such callers there are. */
  check(callers: CallerRegistry, policies: ReadonlyMap<string, unknown>, after: CheckPoint): number {
    let found = 0;
    for (const caller of callers.list) {
      const unknown = caller.policies === undefined ? [] : [...caller.policies].filter((policy) => !policies.has(policy));
      if (unknown.length === 0) continue;
      found++;
      this.logger.warn(
        { caller: caller.name, unknownPolicies: unknown, after },
        `caller ${caller.name} may use ${unknown.length === 1 ? 'a policy' : 'policies'} the policy file does not define (${unknown.join(', ')}): its calls naming ${unknown.length === 1 ? 'it' : 'them'} get NOT_FOUND`,
      );
    }
    if (found === 0 && this.warned) this.logger.info({ after }, 'every policy the callers file names is now defined');
    this.warned = found > 0;
    return found;
  }
}
