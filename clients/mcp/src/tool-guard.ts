import type { McpServer, RegisteredTool, ToolCallback } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AnySchema, ZodRawShapeCompat } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { pino, type Logger } from 'pino';
import { askApproval, type Approver } from './approval.js';
import type { ApprovalTokens } from './approval-token.js';
import { checkSignedApproval } from './signed-approval.js';
import { JsonLinesAuditSink, redactArgumentValues, type AuditRecord, type AuditSink, type ResultStatus } from './audit.js';
import { principalFromAuthInfo, quotaIdentity, type Principal } from './principal.js';
import type { QuotaDecider, QuotaDecision } from './quota-decider.js';
import { refusals } from './refusals.js';
import type { ToolArgs, ToolPolicy } from './tool-policy.js';

/** The `extra` argument the SDK passes to a tool callback. */
export type ToolExtra = Parameters<ToolCallback<undefined>>[0];

export interface ToolGuardOptions {
  /** Decides the quota step (the quota client, or anything with its `allow`). */
  quota: QuotaDecider;
  /** Where audit records go: a sink, or a JSON lines file path. Default `mcp-audit.jsonl`. */
  audit?: AuditSink | string;
  /**
   * The principal of calls that carry no verified credential: the operator's
   * configured identity of a stdio server. Calls with `extra.authInfo` (HTTP with
   * bearer auth) always use the credential's principal instead.
   */
  principal?: Principal;
  /** Approver for sensitive tools when the client cannot show an elicitation form. */
  approver?: Approver;
  /** Checks signed approvals, for tools whose policy says `approval: { signed: true }`. */
  approvalTokens?: ApprovalTokens;
  /** How long an elicitation waits for the human's answer before the call is refused. Default 5 minutes. */
  approvalTimeoutMs?: number;
  /** What the audit record keeps of the arguments. Default: names kept, values redacted. */
  redactArguments?: (tool: string, args: unknown) => unknown;
  /** pino logger; the default writes to stderr, since stdout is the stdio transport. */
  logger?: Logger;
}

interface ToolConfig<InputArgs, OutputArgs> {
  title?: string;
  description?: string;
  inputSchema?: InputArgs;
  outputSchema?: OutputArgs;
  annotations?: ToolAnnotations;
  _meta?: Record<string, unknown>;
}

type StepState = AuditRecord['steps'];

/**
 * Wraps McpServer.registerTool so every call runs the spec's control chain (1.1):
 * validation (the SDK's, before the callback) -> permission -> approval for
 * sensitive tools -> quota -> execute -> audit. A step that refuses returns a tool
 * error result and the tool body never runs. Only public SDK API is used.
 */
export class ToolGuard {
  private readonly audit: AuditSink;
  private readonly logger: Logger;

  constructor(
    readonly server: McpServer,
    private readonly options: ToolGuardOptions,
  ) {
    this.audit = typeof options.audit === 'object' ? options.audit : new JsonLinesAuditSink(options.audit ?? 'mcp-audit.jsonl');
    this.logger = (options.logger ?? pino({ name: 'mcp-tool-guard' }, pino.destination(2))).child({ component: 'mcp-tool-guard' });
  }

  /** McpServer.registerTool with a policy between the config and the callback. */
  registerTool<OutputArgs extends ZodRawShapeCompat | AnySchema, InputArgs extends undefined | ZodRawShapeCompat | AnySchema = undefined>(
    name: string,
    config: ToolConfig<InputArgs, OutputArgs>,
    policy: ToolPolicy<ToolArgs<InputArgs>>,
    callback: ToolCallback<InputArgs>,
  ): RegisteredTool {
    // The SDK calls (args, extra) when the tool has an input schema, else (extra).
    const body = callback as unknown as (...params: unknown[]) => CallToolResult | Promise<CallToolResult>;
    const guarded =
      config.inputSchema === undefined
        ? (extra: ToolExtra) => this.run(name, policy, undefined as ToolArgs<InputArgs>, extra, () => body(extra))
        : (args: ToolArgs<InputArgs>, extra: ToolExtra) => this.run(name, policy, args, extra, () => body(args, extra));
    return this.server.registerTool(name, config, guarded as unknown as ToolCallback<InputArgs>);
  }

  private async run<Args>(
    tool: string,
    policy: ToolPolicy<Args>,
    args: Args,
    extra: ToolExtra,
    body: () => CallToolResult | Promise<CallToolResult>,
  ): Promise<CallToolResult> {
    const started = performance.now();
    const steps: StepState = {
      validation: 'passed',
      authentication: 'failed',
      permission: 'not_checked',
      approval: 'not_checked',
      quota: { outcome: 'not_checked' },
    };
    const principal = this.principalOf(extra);
    let approver: { subject: string; tenant?: string } | undefined;
    const finish = async (result: CallToolResult, status: ResultStatus, reason?: string): Promise<CallToolResult> => {
      await this.record({
        time: new Date().toISOString(),
        tool,
        requestId: extra.requestId,
        ...(extra.sessionId === undefined ? {} : { sessionId: extra.sessionId }),
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
      const signed = checkSignedApproval(this.options.approvalTokens, { tool, args, principal, meta: extra._meta });
      steps.approval = signed.outcome;
      if (signed.outcome === 'required') return finish(refusals.approvalRequired(tool, signed.request), 'refused', 'signed approval required');
      if (signed.outcome === 'invalid') return finish(refusals.approvalInvalid(tool, signed.problem), 'refused', `approval token ${signed.problem}`);
      if (signed.outcome === 'unsupported') return finish(refusals.approval(tool, 'unsupported'), 'refused', 'no approval tokens configured');
      approver = signed.approver;
    } else {
      const custom = policy.approval === true ? undefined : policy.approval.message;
      const message = custom === undefined ? `Allow the tool "${tool}" to run with ${JSON.stringify(args ?? {})}?` : custom(args);
      const outcome = await askApproval(
        this.server,
        { tool, principal, message, signal: extra.signal, relatedRequestId: extra.requestId },
        this.options.approver,
        this.options.approvalTimeoutMs ?? 300_000,
      );
      steps.approval = outcome;
      if (outcome !== 'approved') return finish(refusals.approval(tool, outcome), 'refused', `approval ${outcome}`);
    }

    // Quota.
    if (policy.quota !== undefined) {
      const { policy: policyName, failureMode } = policy.quota;
      let cost: number;
      let decision: QuotaDecision;
      try {
        cost = typeof policy.quota.cost === 'function' ? policy.quota.cost(args) : (policy.quota.cost ?? 1);
        steps.quota = { outcome: 'error', policy: policyName, cost };
        decision = await this.options.quota.allow({ policy: policyName, identity: quotaIdentity(principal), cost });
      } catch (error) {
        steps.quota = { ...steps.quota, outcome: 'error', policy: policyName };
        const message = error instanceof Error ? error.message : String(error);
        return finish(refusals.quotaError(tool, policyName, message), 'refused', `quota check failed: ${message}`);
      }
      steps.quota = { outcome: 'allowed', policy: policyName, cost, source: decision.source };
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
      if (decision.delayMs > 0) await delay(decision.delayMs, extra.signal);
    }

    // Execute. A throwing body stays the SDK's tool error; it is audited first.
    let result: CallToolResult;
    try {
      result = await body();
    } catch (error) {
      await finish({ content: [] }, 'exception', error instanceof Error ? error.message : String(error));
      throw error;
    }
    return finish(result, result.isError === true ? 'tool_error' : 'ok');
  }

  /** Who calls: the verified credential's principal, else the configured one (stdio). */
  principalOf(extra: ToolExtra): Principal | undefined {
    return extra.authInfo !== undefined ? principalFromAuthInfo(extra.authInfo) : this.options.principal;
  }

  private async record(record: AuditRecord): Promise<void> {
    try {
      await this.audit.write(record);
    } catch (error) {
      // A broken audit sink must be loud but must not turn every call into an error.
      this.logger.error({ err: error, tool: record.tool }, 'audit record could not be written');
    }
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

/** Guards the tools registered through the returned object on `server`. */
export function guardTools(server: McpServer, options: ToolGuardOptions): ToolGuard {
  return new ToolGuard(server, options);
}
