import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  type ClientCapabilities,
  type Icon,
  type InputRequiredResult,
  inputRequired,
  inputResponse,
  type McpServer,
  type RegisteredTool,
  requireScopes,
  type ScopeChallengeHandler,
  type ServerContext,
  type StandardSchemaWithJSON,
  type ToolAnnotations,
  type ToolCallback,
} from '@modelcontextprotocol/server';
import { APPROVAL_SCHEMA, outcomeOfAnswer, type AskOutcome } from './approval.js';
import { ControlChain, type ToolGuardOptions } from './control-chain.js';
import type { Principal } from './principal.js';
import type { ToolPolicy } from './tool-policy.js';
import type { ToolResult } from './tool-result.js';

/** The validated arguments a tool with input schema `InputArgs` receives (SDK 2.x). */
export type ToolArgs<InputArgs extends StandardSchemaWithJSON | undefined> = InputArgs extends StandardSchemaWithJSON
  ? StandardSchemaWithJSON.InferOutput<InputArgs>
  : undefined;

interface ToolConfig<InputArgs, OutputArgs> {
  title?: string;
  description?: string;
  inputSchema?: InputArgs;
  outputSchema?: OutputArgs;
  annotations?: ToolAnnotations;
  icons?: Icon[];
  _meta?: Record<string, unknown>;
}

/** The options of the SDK 2.x guard: the shared ones, and what only 2.x can do. */
export interface V2ToolGuardOptions extends ToolGuardOptions {
  /**
   * On HTTP, a call whose verified token lacks one of the tool's `scopes` is answered
   * `403` with `WWW-Authenticate: Bearer error="insufficient_scope", scope="…"` (the
   * SDK's per-tool scope challenge, before the arguments are read), so the client can
   * ask its authorization server for those scopes and call again. The refusal is
   * audited. Default false: the permission step refuses with a `not_permitted` tool
   * result, as on stdio, where there is no token to step up.
   */
  scopeChallenge?: boolean;
}

/** The key of the guard's approval question in `inputRequests` / `inputResponses`. */
const APPROVAL_INPUT_KEY = 'dev.quota-service/approval';

/**
 * Guards an SDK 2.x `McpServer` (`@modelcontextprotocol/server`): wraps its
 * registerTool so every call runs the same control chain as the SDK 1.x guard.
 * Approval by the client is asked with an `input_required` result (multi-round-trip):
 * the client answers and calls again, and the SDK serves 2025-era clients the same
 * way through a real elicitation request.
 */
export class ToolGuard {
  private readonly chain: ControlChain;

  constructor(
    readonly server: McpServer,
    private readonly options: V2ToolGuardOptions,
  ) {
    this.chain = new ControlChain(options);
  }

  /** McpServer.registerTool with a policy between the config and the callback. */
  registerTool<OutputArgs extends StandardSchemaWithJSON, InputArgs extends StandardSchemaWithJSON | undefined = undefined>(
    name: string,
    config: ToolConfig<InputArgs, OutputArgs>,
    policy: ToolPolicy<ToolArgs<InputArgs>>,
    callback: ToolCallback<InputArgs>,
  ): RegisteredTool {
    this.chain.checkPolicy(name, policy);
    // The SDK calls (args, ctx) when the tool has an input schema, else (ctx).
    const body = callback as unknown as (...params: unknown[]) => ToolResult | Promise<ToolResult>;
    const run = (args: ToolArgs<InputArgs>, ctx: ServerContext, params: unknown[]) =>
      this.chain.run<ToolArgs<InputArgs>, InputRequiredResult>(
        {
          tool: name,
          policy,
          args,
          requestId: ctx.mcpReq.id,
          sessionId: ctx.sessionId,
          credential: ctx.http?.authInfo,
          meta: ctx.mcpReq._meta,
          signal: ctx.mcpReq.signal,
          askClient: async (message) => this.askClient(message, ctx),
        },
        () => body(...params),
      ) as Promise<CallToolResult | InputRequiredResult>;
    const guarded =
      config.inputSchema === undefined
        ? (ctx: ServerContext) => run(undefined as ToolArgs<InputArgs>, ctx, [ctx])
        : (args: ToolArgs<InputArgs>, ctx: ServerContext) => run(args, ctx, [args, ctx]);
    const scopes = policy.scopes ?? [];
    const challenge = this.options.scopeChallenge === true && scopes.length > 0 ? this.scopeChallenge(name, [scopes[0]!, ...scopes.slice(1)]) : undefined;
    return this.server.registerTool(
      name,
      { ...config, ...(challenge === undefined ? {} : { scopeChallenge: challenge }) },
      guarded as unknown as ToolCallback<InputArgs>,
    );
  }

  /** The SDK's exact-scopes challenge for a tool, with the refusal audited. */
  private scopeChallenge(tool: string, scopes: readonly [string, ...string[]]): ScopeChallengeHandler {
    const required = requireScopes(...scopes);
    return async (context) => {
      const challenge = await required(context);
      if (challenge !== undefined && context.authInfo !== undefined) {
        const held = new Set(context.authInfo.scopes);
        await this.chain.auditEarlyRefusal({
          tool,
          requestId: context.request.id,
          credential: context.authInfo,
          args: (context.request.params as { arguments?: unknown } | undefined)?.arguments,
          reason: `missing scope ${scopes.filter((scope) => !held.has(scope)).join(', ')}: answered 403 insufficient_scope`,
        });
      }
      return challenge;
    };
  }

  /**
   * Checks at start that the quota service has every policy the registered tools name
   * (through the quota client's listPolicies()). Rejects with each missing tool and
   * policy, or when the service cannot be asked.
   */
  checkPolicies(): Promise<void> {
    return this.chain.checkPolicies();
  }

  /** Who calls: the verified credential's principal, else the configured one (stdio). */
  principalOf(ctx: ServerContext): Principal | undefined {
    return this.chain.principalOf(ctx.http?.authInfo);
  }

  /**
   * The client's answer when this round carries one; else, when the client declared
   * form elicitation, an `input_required` result that asks it. The answer comes from
   * the client, like an elicitation's: it proves only that the client said yes; for a
   * second person's approval, use signed approvals.
   */
  private askClient(message: string, ctx: ServerContext): AskOutcome | { pending: InputRequiredResult } {
    const answer = inputResponse(ctx.mcpReq.inputResponses, APPROVAL_INPUT_KEY);
    if (answer.kind === 'elicit') return outcomeOfAnswer(answer);
    if (answer.kind !== 'missing') return 'failed';
    const declared = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined;
    const capabilities = declared ?? this.server.server.getClientCapabilities();
    if (capabilities?.elicitation?.form === undefined) return 'unsupported';
    return { pending: inputRequired({ inputRequests: { [APPROVAL_INPUT_KEY]: inputRequired.elicit({ message, requestedSchema: APPROVAL_SCHEMA }) } }) };
  }
}

/** Guards the tools registered through the returned object on an SDK 2.x `server`. */
export function guardTools(server: McpServer, options: V2ToolGuardOptions): ToolGuard {
  return new ToolGuard(server, options);
}
