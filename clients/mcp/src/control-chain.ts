import { pino, type Logger } from 'pino';
import { askApprover, type Approver, type AskOutcome } from './approval.js';
import type { ApprovalTokens } from './approval-token.js';
import { JsonLinesAuditSink, redactArgumentValues, StderrAuditSink, writeAuditRecord, type AuditRecord, type AuditSink, type ResultStatus } from './audit.js';
import { acquireInFlight, releaseInFlight } from './in-flight-cap.js';
import { principalFromAuthInfo, quotaIdentity, type Principal, type VerifiedCredential } from './principal.js';
import type { GuardQuota, Lease, QuotaDecision, Reservation } from './quota-decider.js';
import { refusals } from './refusals.js';
import { actualCost, settleReservation } from './settlement.js';
import { checkSignedApproval } from './signed-approval.js';
import type { ToolPolicy } from './tool-policy.js';
import type { ToolResult } from './tool-result.js';

export interface ToolGuardOptions {
  /**
   * Decides the quota step: the quota client, or anything with its `allow`; tools
   * with `quota.estimate` need its `reserve`, tools with `concurrency` its `acquire`.
   */
  quota: GuardQuota;
  /** Where audit records go: a sink, or a JSON lines file path. Default: JSON lines on stderr. */
  audit?: AuditSink | string;
  /**
   * The principal of calls that carry no verified credential: the operator's
   * configured identity of a stdio server. Calls with a verified credential (HTTP
   * with bearer auth) always use the credential's principal instead.
   */
  principal?: Principal;
  /** Approver for sensitive tools when the client cannot show an elicitation form. */
  approver?: Approver;
  /** Checks signed approvals, for tools whose policy says `approval: { signed: true }`. */
  approvalTokens?: ApprovalTokens;
  /**
   * How long an elicitation waits for the human's answer before the call is refused.
   * Default 5 minutes. SDK 1.x only: on SDK 2.x the client answers an `input_required`
   * result and calls again (the server's `inputRequired.roundTimeoutMs` bounds 2025-era rounds).
   */
  approvalTimeoutMs?: number;
  /** What the audit record keeps of the arguments. Default: names kept, values redacted. */
  redactArguments?: (tool: string, args: unknown) => unknown;
  /** pino logger; the default writes to stderr, since stdout is the stdio transport. */
  logger?: Logger;
}

/** One tools/call as a binding hands it to the chain, whatever the SDK line. */
export interface GuardedCall<Args, Pending> {
  tool: string;
  policy: ToolPolicy<Args>;
  /** The arguments after the SDK's validation. */
  args: Args;
  requestId: string | number;
  sessionId?: string | undefined;
  credential?: VerifiedCredential | undefined;
  meta?: Record<string, unknown> | undefined;
  signal: AbortSignal;
  /**
   * Asks the connected client to approve: its answer, 'unsupported' when it cannot
   * be asked, or `{ pending }`: a result that asks it and ends this round (the client
   * answers by calling again; multi-round-trip, SDK 2.x). A pending round is not audited.
   */
  askClient(message: string): Promise<AskOutcome | { pending: Pending }>;
}

type StepState = AuditRecord['steps'];

/**
 * The control chain both SDK bindings share: validation (the SDK's, before the
 * binding sees the call) -> authentication -> permission -> approval for sensitive
 * tools -> quota -> execute -> audit. A step that refuses returns a tool error
 * result and the tool body never runs.
 */
export class ControlChain {
  private readonly audit: AuditSink;
  readonly logger: Logger;

  constructor(readonly options: ToolGuardOptions) {
    this.audit =
      typeof options.audit === 'object' ? options.audit : options.audit === undefined ? new StderrAuditSink() : new JsonLinesAuditSink(options.audit);
    this.logger = (options.logger ?? pino({ name: 'mcp-tool-guard' }, pino.destination(2))).child({ component: 'mcp-tool-guard' });
  }

  /** The quota policies each registered tool names, for checkPolicies(). */
  private readonly toolPolicies = new Map<string, string[]>();

  /** Refuses, when a tool is registered, a policy the chain could not carry out. */
  checkPolicy(tool: string, policy: ToolPolicy<never>): void {
    const names = [policy.quota?.policy, policy.concurrency?.policy].filter((name): name is string => name !== undefined);
    if (names.length > 0) this.toolPolicies.set(tool, names);
    const quota = policy.quota;
    if (quota?.estimate !== undefined) {
      if (quota.cost !== undefined) throw new TypeError(`tool ${tool}: quota.cost and quota.estimate exclude each other (estimate reserves, then settles)`);
      if (quota.actual === undefined) throw new TypeError(`tool ${tool}: quota.estimate needs quota.actual, the cost to settle from the result`);
      if (typeof this.options.quota.reserve !== 'function') throw new TypeError(`tool ${tool}: quota.estimate needs a quota client with reserve()`);
    } else if (quota?.actual !== undefined) {
      throw new TypeError(`tool ${tool}: quota.actual needs quota.estimate`);
    }
    if (policy.concurrency !== undefined && typeof this.options.quota.acquire !== 'function') {
      throw new TypeError(`tool ${tool}: concurrency needs a quota client with acquire()`);
    }
  }

  /**
   * Asks the quota service (the quota client's listPolicies) whether it has every
   * policy the registered tools name, so that a misspelt or missing policy shows at
   * start, not at a tool's first call. Rejects naming each tool and policy missing;
   * rejects too when the service cannot be asked.
   */
  async checkPolicies(): Promise<void> {
    const list = this.options.quota.listPolicies;
    if (typeof list !== 'function') throw new TypeError('checkPolicies needs a quota client with listPolicies()');
    const known = new Set(await list.call(this.options.quota));
    const missing: string[] = [];
    for (const [tool, names] of this.toolPolicies) {
      for (const name of names) if (!known.has(name)) missing.push(`tool ${tool}: policy ${name}`);
    }
    if (missing.length > 0) {
      const has = known.size === 0 ? 'none' : [...known].sort().join(', ');
      throw new Error(`the quota service has no such policy (or this caller may not use it): ${missing.join('; ')}. It has: ${has}`);
    }
  }

  /** Who calls: the verified credential's principal, else the configured one (stdio). */
  principalOf(credential: VerifiedCredential | undefined): Principal | undefined {
    return credential !== undefined ? principalFromAuthInfo(credential) : this.options.principal;
  }

  async run<Args, Pending>(call: GuardedCall<Args, Pending>, body: () => ToolResult | Promise<ToolResult>): Promise<ToolResult | Pending> {
    const { tool, policy, args } = call;
    const started = performance.now();
    const steps: StepState = {
      validation: 'passed',
      authentication: 'failed',
      permission: 'not_checked',
      approval: 'not_checked',
      quota: { outcome: 'not_checked' },
    };
    const principal = this.principalOf(call.credential);
    let approver: { subject: string; tenant?: string } | undefined;
    // The in-flight lease is released before the record is written, whatever ended the call.
    let lease: Lease | undefined;
    const finish = async (result: ToolResult, status: ResultStatus, reason?: string): Promise<ToolResult> => {
      if (lease !== undefined && steps.concurrency !== undefined) await releaseInFlight(lease, steps.concurrency, this.logger, tool);
      await this.record({
        time: new Date().toISOString(),
        tool,
        requestId: call.requestId,
        ...(call.sessionId === undefined ? {} : { sessionId: call.sessionId }),
        principal:
          principal === undefined
            ? null
            : {
                subject: principal.subject,
                ...(principal.tenant === undefined ? {} : { tenant: principal.tenant }),
                ...(principal.clientId === undefined ? {} : { clientId: principal.clientId }),
              },
        ...(approver === undefined ? {} : { approver }),
        arguments: (this.options.redactArguments ?? ((_: string, a: unknown) => redactArgumentValues(a)))(tool, args),
        steps,
        result: status,
        ...(reason === undefined ? {} : { reason }),
        durationMs: Math.round((performance.now() - started) * 1000) / 1000,
      });
      return result;
    };

    // Authentication: the identity comes from the verified credential or the
    // operator's configuration, never from arguments (a `user` argument is just data).
    if (principal === undefined) return finish(refusals.notAuthenticated(tool), 'refused', 'no verified principal');
    steps.authentication = 'passed';

    // Permission.
    const missingScope = (policy.scopes ?? []).find((scope) => !principal.scopes.includes(scope));
    const roleOk = policy.roles === undefined || policy.roles.some((role) => principal.roles.includes(role));
    if (missingScope !== undefined || !roleOk) {
      steps.permission = 'denied';
      const why = missingScope !== undefined ? `missing scope ${missingScope}` : `needs one of roles ${policy.roles?.join(', ')}`;
      return finish(refusals.notPermitted(tool), 'refused', why);
    }
    steps.permission = 'allowed';

    // Approval for sensitive tools, before any quota is spent on them.
    if (policy.approval === undefined) {
      steps.approval = 'not_required';
    } else if (policy.approval !== true && policy.approval.signed === true) {
      const signed = checkSignedApproval(this.options.approvalTokens, { tool, args, principal, meta: call.meta });
      steps.approval = signed.outcome;
      if (signed.outcome === 'required') return finish(refusals.approvalRequired(tool, signed.request), 'refused', 'signed approval required');
      if (signed.outcome === 'invalid') return finish(refusals.approvalInvalid(tool, signed.problem), 'refused', `approval token ${signed.problem}`);
      if (signed.outcome === 'unsupported') return finish(refusals.approval(tool, 'unsupported'), 'refused', 'no approval tokens configured');
      approver = signed.approver;
    } else {
      const custom = policy.approval === true ? undefined : policy.approval.message;
      const message = custom === undefined ? `Allow the tool "${tool}" to run with ${JSON.stringify(args ?? {})}?` : custom(args);
      let outcome = await call.askClient(message);
      if (typeof outcome === 'object') return outcome.pending;
      if (outcome === 'unsupported') outcome = await askApprover(this.options.approver, { tool, principal, message, signal: call.signal });
      steps.approval = outcome;
      if (outcome !== 'approved') return finish(refusals.approval(tool, outcome), 'refused', `approval ${outcome}`);
    }

    // In-flight cap: a lease held until the call ends, taken before any quota is
    // spent so a full cap costs the caller nothing.
    if (policy.concurrency !== undefined) {
      const inFlight = await acquireInFlight(this.options.quota, tool, policy.concurrency, quotaIdentity(principal));
      steps.concurrency = inFlight.step;
      if ('refusal' in inFlight) return finish(inFlight.refusal, 'refused', inFlight.reason);
      lease = inFlight.lease;
      if (inFlight.step.outcome === 'fail_open')
        this.logger.warn({ tool, policy: policy.concurrency.policy }, 'quota service unavailable, in-flight cap failing open');
    }

    // Quota: a plain spend of `cost`, or a reservation of `estimate` settled after the call.
    let reservation: Reservation | undefined;
    if (policy.quota !== undefined) {
      const { policy: policyName, failureMode } = policy.quota;
      let cost: number;
      let decision: QuotaDecision;
      try {
        if (policy.quota.estimate !== undefined) {
          cost = typeof policy.quota.estimate === 'function' ? policy.quota.estimate(args) : policy.quota.estimate;
          steps.quota = { outcome: 'error', policy: policyName, cost, estimate: cost };
          // reserve() exists: checked when the tool was registered.
          reservation = await this.options.quota.reserve!({ policy: policyName, identity: quotaIdentity(principal), estimate: cost });
          decision = reservation.decision;
        } else {
          cost = typeof policy.quota.cost === 'function' ? policy.quota.cost(args) : (policy.quota.cost ?? 1);
          steps.quota = { outcome: 'error', policy: policyName, cost };
          decision = await this.options.quota.allow({ policy: policyName, identity: quotaIdentity(principal), cost });
        }
      } catch (error) {
        steps.quota = { ...steps.quota, outcome: 'error', policy: policyName };
        const message = error instanceof Error ? error.message : String(error);
        return finish(refusals.quotaError(tool, policyName, message), 'refused', `quota check failed: ${message}`);
      }
      steps.quota = { ...steps.quota, outcome: 'allowed', policy: policyName, cost, source: decision.source };
      if (decision.source === 'fail_open' || decision.source === 'fail_closed') {
        // The service was not asked: the tool's failure mode decides, else the client's.
        const open = failureMode === undefined ? decision.allowed : failureMode === 'open';
        steps.quota.outcome = open ? 'fail_open' : 'fail_closed';
        if (!open) return finish(refusals.quotaUnavailable(tool, policyName), 'refused', 'quota service unavailable, failing closed');
        this.logger.warn({ tool, policy: policyName }, 'quota service unavailable, failing open');
      } else if (!decision.allowed) {
        steps.quota = { ...steps.quota, outcome: 'denied', deniedBy: decision.deniedBy, retryAfterMs: decision.retryAfterMs };
        return finish(refusals.rateLimited(tool, policyName, decision.deniedBy, decision.retryAfterMs), 'refused', `rate limited by ${decision.deniedBy}`);
      }
      // A shaping limit admits the call after a wait.
      if (decision.delayMs > 0) await delay(decision.delayMs, call.signal);
    }

    // Execute. A throwing body stays the SDK's tool error; it is audited first.
    let result: ToolResult;
    try {
      result = await body();
    } catch (error) {
      if (reservation !== undefined) await settleReservation(reservation, 0, steps.quota, this.logger, tool);
      await finish({ content: [] }, 'exception', error instanceof Error ? error.message : String(error));
      throw error;
    }
    if (reservation !== undefined && policy.quota !== undefined) {
      await settleReservation(reservation, actualCost(policy.quota, reservation, result, args, this.logger, tool), steps.quota, this.logger, tool);
    }
    return finish(result, result.isError === true ? 'tool_error' : 'ok');
  }

  /**
   * Audits a call the SDK refused before the chain ran (an HTTP scope challenge):
   * authenticated, not permitted, nothing executed. `args` are the unvalidated
   * arguments, redacted like any others.
   */
  async auditEarlyRefusal(call: { tool: string; requestId: string | number; credential: VerifiedCredential; args: unknown; reason: string }): Promise<void> {
    const principal = principalFromAuthInfo(call.credential);
    await this.record({
      time: new Date().toISOString(),
      tool: call.tool,
      requestId: call.requestId,
      principal: {
        subject: principal.subject,
        ...(principal.tenant === undefined ? {} : { tenant: principal.tenant }),
        ...(principal.clientId === undefined ? {} : { clientId: principal.clientId }),
      },
      arguments: (this.options.redactArguments ?? ((_: string, a: unknown) => redactArgumentValues(a)))(call.tool, call.args),
      steps: { validation: 'not_checked', authentication: 'passed', permission: 'denied', approval: 'not_checked', quota: { outcome: 'not_checked' } },
      result: 'refused',
      reason: call.reason,
      durationMs: 0,
    });
  }

  private async record(record: AuditRecord): Promise<void> {
    await writeAuditRecord(this.audit, record, this.logger);
  }
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}
