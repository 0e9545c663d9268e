// The reference MCP server's entry point: the only place that reads the
// environment, handles signals and wires the parts. Logs go to stderr: on stdio,
// stdout is the protocol channel.
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { type Logger, pino } from 'pino';
import { createQuotaClient } from '@quota-service/client';
import { appendFile } from 'node:fs/promises';
import { ApprovalTokens, type AuditSink, JsonLinesAuditSink, type Principal, StderrAuditSink } from '@quota-service/mcp/v2';
import { discoverAuthorizationServer } from './authorization-server.js';
import { loadMcpServerConfig, type McpServerConfig } from './config.js';
import { HelpDesk } from './help-desk.js';
import { startHttpTransport } from './http-transport.js';
import { createReferenceServer, createReferenceServerWithGuard, type ReferenceServerDeps } from './reference-server.js';

/** The principal of stdio calls: whoever started the process, as the operator configured it. */
function stdioPrincipal(config: McpServerConfig): Principal {
  if (config.MCP_STDIO_SUBJECT === undefined) {
    throw new Error('invalid configuration:\n  MCP_STDIO_SUBJECT: required with MCP_TRANSPORT=stdio: who runs this process (the principal of every call)');
  }
  return {
    subject: config.MCP_STDIO_SUBJECT,
    scopes: config.MCP_STDIO_SCOPES,
    roles: config.MCP_STDIO_ROLES,
    ...(config.MCP_STDIO_TENANT === undefined ? {} : { tenant: config.MCP_STDIO_TENANT }),
  };
}

/**
 * The audit sink: the file MCP_AUDIT_FILE names, checked now (a path that cannot be
 * written stops the start with one line), or stderr, beside the logs: a host may start
 * the server in any directory, so no file is written where it happens to stand.
 */
async function auditSink(file: string | undefined): Promise<AuditSink> {
  if (file === undefined) return new StderrAuditSink();
  try {
    await appendFile(file, '', { mode: 0o600 });
  } catch (error) {
    throw new Error(`invalid configuration:\n  MCP_AUDIT_FILE: cannot write ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return new JsonLinesAuditSink(file);
}

/**
 * Every policy a guarded tool names must exist in the quota service: a missing one
 * stops the start, rather than failing the tool at its first call. A quota service
 * that cannot be asked now is only warned about: it may come up after this server.
 */
async function checkToolPolicies(deps: ReferenceServerDeps, config: McpServerConfig, logger: Logger): Promise<void> {
  const { guard } = createReferenceServerWithGuard(deps);
  try {
    await guard.checkPolicies();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (/no such policy/.test(reason)) throw new Error(`the tools' quota policies are not all in the quota service at ${config.MCP_QUOTA_ADDR}: ${reason}`);
    logger.warn({ quota: config.MCP_QUOTA_ADDR, reason }, "could not check the tools' quota policies: the quota service did not answer");
  }
}

async function main(): Promise<void> {
  const config = loadMcpServerConfig(process.env);
  const logger = pino({ name: 'mcp-server', level: config.MCP_LOG_LEVEL }, pino.destination(2));
  const quota = createQuotaClient({ address: config.MCP_QUOTA_ADDR, deadlineMs: config.MCP_QUOTA_TIMEOUT_MS, logger });
  const desk = new HelpDesk();
  const approvals =
    config.MCP_APPROVAL_SECRET === undefined
      ? undefined
      : new ApprovalTokens({ secret: config.MCP_APPROVAL_SECRET, crossTenantRoles: config.MCP_APPROVAL_CROSS_TENANT_ROLES });
  if (approvals === undefined) {
    logger.warn('delete_customer is approved by elicitation: the calling client answers for itself. Set MCP_APPROVAL_SECRET to require an approver');
  }
  // One sink for the guard's records and the HTTP endpoint's refusals of tool calls.
  const audit = await auditSink(config.MCP_AUDIT_FILE);
  const deps = { desk, quota, audit, logger, ...(approvals === undefined ? {} : { approvals }) };

  let stop: () => Promise<void>;
  if (config.MCP_TRANSPORT === 'stdio') {
    const principal = stdioPrincipal(config);
    await checkToolPolicies({ ...deps, principal }, config, logger);
    const stdio = serveStdio(() => createReferenceServer({ ...deps, principal }), {
      onerror: (error) => logger.warn({ reason: error.message }, 'MCP stdio error'),
    });
    logger.info({ principal: principal.subject, quota: config.MCP_QUOTA_ADDR }, 'MCP server on stdio');
    stop = () => stdio.close();
    // The host closing our stdin ends the connection.
    process.stdin.once('end', () => void shutdown('stdin closed'));
  } else {
    if (config.MCP_AUTHORIZATION_SERVER === undefined) {
      throw new Error(
        'invalid configuration:\n  MCP_AUTHORIZATION_SERVER: required with MCP_TRANSPORT=http: the issuer URL of the authorization server whose tokens are accepted (make run-mcp starts a development one)',
      );
    }
    await checkToolPolicies(deps, config, logger);
    const authorizationServer = await discoverAuthorizationServer(config.MCP_AUTHORIZATION_SERVER);
    const http = await startHttpTransport({
      host: config.MCP_HTTP_HOST,
      port: config.MCP_HTTP_PORT,
      ...(config.resourceUrl === undefined ? {} : { resourceUrl: config.resourceUrl }),
      ...(config.allowedHosts === undefined ? {} : { allowedHosts: config.allowedHosts }),
      ...(config.allowedOrigins === undefined ? {} : { allowedOrigins: config.allowedOrigins }),
      authorizationServer,
      routingHeaders: config.MCP_ROUTING_HEADERS,
      audit,
      createServer: () => createReferenceServer(deps),
      logger,
    });
    // Machine-readable for whoever started us with port 0 (tests, scripts).
    logger.info({ port: http.port, resource: http.resourceUrl.href }, 'ready');
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
