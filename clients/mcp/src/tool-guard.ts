import type { McpServer, RegisteredTool, ToolCallback } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AnySchema, SchemaOutput, ShapeOutput, ZodRawShapeCompat } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { APPROVAL_SCHEMA, outcomeOfAnswer, type AskOutcome } from './approval.js';
import { ControlChain, type ToolGuardOptions } from './control-chain.js';
import type { Principal } from './principal.js';
import type { ToolPolicy } from './tool-policy.js';
import type { ToolResult } from './tool-result.js';

/** The `extra` argument SDK 1.x passes to a tool callback. */
export type ToolExtra = Parameters<ToolCallback<undefined>>[0];

/** The validated arguments a tool with input schema `InputArgs` receives (SDK 1.x). */
export type ToolArgs<InputArgs extends undefined | ZodRawShapeCompat | AnySchema> = InputArgs extends ZodRawShapeCompat
  ? ShapeOutput<InputArgs>
  : InputArgs extends AnySchema
    ? SchemaOutput<InputArgs>
    : undefined;

interface ToolConfig<InputArgs, OutputArgs> {
  title?: string;
  description?: string;
  inputSchema?: InputArgs;
  outputSchema?: OutputArgs;
  annotations?: ToolAnnotations;
  _meta?: Record<string, unknown>;
}

/**
 * Guards an SDK 1.x `McpServer` (`@modelcontextprotocol/sdk`): wraps its
 * registerTool so every call runs the control chain. Only public SDK API is used.
 */
export class ToolGuard {
  private readonly chain: ControlChain;

  constructor(
    readonly server: McpServer,
    private readonly options: ToolGuardOptions,
  ) {
    this.chain = new ControlChain(options);
  }

  /** McpServer.registerTool with a policy between the config and the callback. */
  registerTool<OutputArgs extends ZodRawShapeCompat | AnySchema, InputArgs extends undefined | ZodRawShapeCompat | AnySchema = undefined>(
    name: string,
    config: ToolConfig<InputArgs, OutputArgs>,
    policy: ToolPolicy<ToolArgs<InputArgs>>,
    callback: ToolCallback<InputArgs>,
  ): RegisteredTool {
    this.chain.checkPolicy(name, policy);
    // The SDK calls (args, extra) when the tool has an input schema, else (extra).
    const body = callback as unknown as (...params: unknown[]) => ToolResult | Promise<ToolResult>;
    const run = (args: ToolArgs<InputArgs>, extra: ToolExtra, params: unknown[]) =>
      this.chain.run(
        {
          tool: name,
          policy,
          args,
          requestId: extra.requestId,
          sessionId: extra.sessionId,
          credential: extra.authInfo,
          meta: extra._meta,
          signal: extra.signal,
          askClient: (message) => this.elicit(message, extra),
        },
        () => body(...params),
      ) as Promise<CallToolResult>;
    const guarded =
      config.inputSchema === undefined
        ? (extra: ToolExtra) => run(undefined as ToolArgs<InputArgs>, extra, [extra])
        : (args: ToolArgs<InputArgs>, extra: ToolExtra) => run(args, extra, [args, extra]);
    return this.server.registerTool(name, config, guarded as unknown as ToolCallback<InputArgs>);
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
  principalOf(extra: ToolExtra): Principal | undefined {
    return this.chain.principalOf(extra.authInfo);
  }

  /**
   * Asks through MCP elicitation when the client declared the form capability.
   * Elicitation proves only that the connected client answered yes; for a second
   * person's approval, use signed approvals.
   */
  private async elicit(message: string, extra: ToolExtra): Promise<AskOutcome> {
    if (this.server.server.getClientCapabilities()?.elicitation?.form === undefined) return 'unsupported';
    try {
      const answer = await this.server.server.elicitInput(
        { mode: 'form', message, requestedSchema: APPROVAL_SCHEMA },
        // Related to the tools/call, so Streamable HTTP sends it on that call's stream.
        // A human answers: the SDK's 60 s request default is too short for that.
        { relatedRequestId: extra.requestId, signal: extra.signal, timeout: this.options.approvalTimeoutMs ?? 300_000 },
      );
      return outcomeOfAnswer(answer);
    } catch {
      return 'failed';
    }
  }
}

/** Guards the tools registered through the returned object on an SDK 1.x `server`. */
export function guardTools(server: McpServer, options: ToolGuardOptions): ToolGuard {
  return new ToolGuard(server, options);
}
