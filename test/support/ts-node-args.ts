/**
 * How a test runs TypeScript in a child process without a build: Node with the
 * tsx loader, resolving the workspace packages (@quota-service/*) to their
 * sources through the `@quota-service/source` export condition.
 */
export const TS_NODE_ARGS: readonly string[] = ['--conditions=@quota-service/source', '--import', 'tsx'];
