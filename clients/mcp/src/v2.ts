// The SDK 2.x binding (`@modelcontextprotocol/server`). The main entry binds SDK 1.x.
export { guardTools, ToolGuard, type ToolArgs, type V2ToolGuardOptions } from './v2-tool-guard.js';
export * from './sdk-free.js';
