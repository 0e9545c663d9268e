export { guardTools, ToolGuard, type ToolArgs, type ToolExtra } from './tool-guard.js';
export * from './sdk-free.js';
