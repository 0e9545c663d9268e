/**
 * A tool result as both SDK lines shape it (`CallToolResult` of
 * `@modelcontextprotocol/sdk` 1.x and of `@modelcontextprotocol/server` 2.x):
 * the guard builds and passes on results without importing either SDK.
 */
export interface ToolResult {
  content: unknown[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
  [key: string]: unknown;
}
