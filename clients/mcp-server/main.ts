// The reference MCP server's entry point: the only place that reads the
// environment, handles signals and wires the parts. Logs go to stderr: on stdio,
// stdout is the protocol channel.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { pino } from 'pino';
import { createQuotaClient } from '@quota-service/client';
import { ApprovalTokens } from '@quota-service/mcp';
import { loadMcpServerConfig } from './config.js';
import { loadDevCredentials } from './dev-tokens.js';
import { HelpDesk } from './help-desk.js';
import { startHttpTransport } from './http-transport.js';
import { createReferenceServer } from './reference-server.js';

async function main(): Promise<void> {
  const config = loadMcpServerConfig(process.env);
  const logger = pino({ name: 'mcp-server', level: config.MCP_LOG_LEVEL }, pino.destination(2));
  const credentials = await loadDevCredentials(config.MCP_DEV_TOKENS);
  const quota = createQuotaClient({ address: config.MCP_QUOTA_ADDR, deadlineMs: config.MCP_QUOTA_TIMEOUT_MS, logger });
  const desk = new HelpDesk();
  const approvals = config.MCP_APPROVAL_SECRET === undefined ? undefined : new ApprovalTokens({ secret: config.MCP_APPROVAL_SECRET });
  if (approvals === undefined) {
    logger.warn('delete_customer is approved by elicitation: the calling client answers for itself. Set MCP_APPROVAL_SECRET to require an approver');
  }
  const deps = { desk, quota, audit: config.MCP_AUDIT_FILE, logger, ...(approvals === undefined ? {} : { approvals }) };

  let stop: () => Promise<void>;
  if (config.MCP_TRANSPORT === 'stdio') {
    if (credentials.stdioPrincipal === undefined) {
      throw new Error(`${config.MCP_DEV_TOKENS} has no stdio_principal: stdio calls would have no identity`);
    }
    const server = createReferenceServer({ ...deps, principal: credentials.stdioPrincipal });
    await server.connect(new StdioServerTransport());
    logger.info({ principal: credentials.stdioPrincipal.subject, quota: config.MCP_QUOTA_ADDR }, 'MCP server on stdio');
    stop = () => server.close();
    // The host closing our stdin ends the session.
    process.stdin.once('end', () => void shutdown('stdin closed'));
  } else {
    const http = await startHttpTransport({
      host: config.MCP_HTTP_HOST,
      port: config.MCP_HTTP_PORT,
      resourceUrl: config.resourceUrl,
      allowedHosts: config.allowedHosts,
      ...(config.allowedOrigins === undefined ? {} : { allowedOrigins: config.allowedOrigins }),
      authorizationServers: config.MCP_AUTHORIZATION_SERVERS,
      verifier: credentials.verifier,
      sessionIdleTimeoutMs: config.MCP_SESSION_IDLE_TIMEOUT_MS,
      maxSessionsPerPrincipal: config.MCP_MAX_SESSIONS_PER_PRINCIPAL,
      createServer: () => createReferenceServer(deps),
      logger,
    });
    // Machine-readable for whoever started us with port 0 (tests, scripts).
    logger.info({ port: http.port }, 'ready');
    stop = () => http.close();
  }

  let stopping = false;
  const shutdown = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ reason }, 'shutting down');
    await stop();
    await quota.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`mcp-server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
