import type { Harness, HarnessOptions } from './guard-harness.js';
import { startV1Harness } from './harness-v1.js';
import { startV2Harness } from './harness-v2.js';
import { startV2HttpHarness } from './harness-v2-http.js';

/** What a call ends with: the tool result, or the JSON-RPC error the client threw. */
export type CallOutcome = { result: unknown } | { error: { code: unknown; message: string } };

/** One SDK line the guard suite runs against: its harness, and where its own errors differ. */
export interface SdkLine {
  name: string;
  start(options: HarnessOptions): Promise<Harness>;
  /** How the SDK answers a call of a tool that does not exist (the guard never sees it). */
  unknownTool: CallOutcome;
}

export const sdkLines: SdkLine[] = [
  {
    name: 'SDK 1.x (@modelcontextprotocol/sdk)',
    start: startV1Harness,
    unknownTool: { result: { content: [{ type: 'text', text: 'MCP error -32602: Tool no_such_tool not found' }], isError: true } },
  },
  {
    name: 'SDK 2.x (@modelcontextprotocol/server)',
    start: startV2Harness,
    unknownTool: { error: { code: -32602, message: 'Tool no_such_tool not found' } },
  },
  {
    name: 'SDK 2.x on 2026-07-28 (@modelcontextprotocol/server, createMcpHandler)',
    start: startV2HttpHarness,
    unknownTool: { error: { code: -32602, message: 'Tool no_such_tool not found' } },
  },
];
