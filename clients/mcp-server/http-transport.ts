import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getOAuthProtectedResourceMetadataUrl, hostHeaderValidation, mcpAuthMetadataRouter, requireBearerAuth } from '@modelcontextprotocol/express';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, type McpServerFactory, type OAuthTokenVerifier } from '@modelcontextprotocol/server';
import express from 'express';
import type { Logger } from 'pino';
import type { AuditSink } from '@quota-service/mcp/v2';
import type { AuthorizationServer } from './authorization-server.js';
import { errorHandler, MAX_BODY_BYTES, notFound } from './http-errors.js';
import { jsonDepthLimit } from './json-depth.js';
import { createJwtVerifier } from './jwt-verifier.js';
import { originValidation } from './origin-validation.js';
import { REFERENCE_SCOPES } from './reference-server.js';
import { type RoutingHeadersMode, routingHeaders } from './routing-headers.js';

export interface HttpTransportOptions {
  /** Interface to bind, e.g. 127.0.0.1. */
  host: string;
  /** 0 picks a free port. */
  port: number;
  /**
   * The server's canonical URL (RFC 8707 resource, the audience of the tokens it
   * accepts), e.g. https://mcp.example.com/mcp; its path is where MCP is served.
   * Default `http://localhost:<bound port>/mcp`.
   */
  resourceUrl?: URL;
  /** Host header names accepted (DNS rebinding protection). Default: loopback names and the resource URL's host. */
  allowedHosts?: string[];
  /**
   * Origin header values accepted on the MCP endpoint, exactly. Unset: the
   * server's own origin only (same host and port as the Host header).
   */
  allowedOrigins?: string[];
  /** The authorization server named in the protected resource metadata, whose tokens are accepted. */
  authorizationServer: AuthorizationServer;
  /** Checks bearer tokens. Default: JWT access tokens of `authorizationServer` for this resource. */
  verifier?: OAuthTokenVerifier;
  /**
   * Whether every tools/call must name its method and tool in the Mcp-Method and
   * Mcp-Name headers, whatever protocol revision it claims (routing-headers.ts).
   * Default `required`: the headers can then be trusted by a gateway.
   */
  routingHeaders?: RoutingHeadersMode;
  /** Where tool calls refused here (routing headers) are audited, as the guard audits its refusals. Default: not audited. */
  audit?: AuditSink;
  /** Builds the McpServer that answers one request (the protocol is stateless). */
  createServer: McpServerFactory;
  logger: Logger;
}

export interface RunningHttpServer {
  port: number;
  /** The resource URL the server was bound to (its token audience). */
  resourceUrl: URL;
  close(): Promise<void>;
}

/** A failed bind in words, naming the cause the operator can act on. */
const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'address in use (another process listens there)',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EADDRNOTAVAIL: 'no network interface of this machine has that address',
};

/**
 * Streamable HTTP for the 2026-07-28 revision (and, statelessly, for 2025-era
 * clients), with what the MCP authorization spec asks of a server: Host and
 * Origin validation, protected resource metadata (RFC 9728) naming the
 * authorization server, bearer tokens checked for this resource (audience), and
 * 401/403 challenges pointing at that metadata. Before the SDK sees a body, it
 * is refused when nested too deep (json-depth.ts) or when its Mcp-Method and
 * Mcp-Name headers do not name it, on every protocol revision (routing-headers.ts;
 * the SDK checks them on 2026-07-28 requests only). The SDK answers per-tool scope
 * challenges. Every error answer is JSON (http-errors.ts): no stack traces or
 * paths, whatever NODE_ENV says.
 */
export async function startHttpTransport(options: HttpTransportOptions): Promise<RunningHttpServer> {
  const { logger } = options;
  // Listen first: the default resource URL names the port the OS picked.
  const http: HttpServer = createServer();
  await new Promise<void>((resolve, reject) => {
    http.once('error', (error: NodeJS.ErrnoException) =>
      reject(new Error(`MCP_HTTP_HOST, MCP_HTTP_PORT: cannot listen on ${options.host}:${options.port}: ${LISTEN_ERRORS[error.code ?? ''] ?? error.message}`)),
    );
    http.listen(options.port, options.host, () => resolve());
  });
  const port = (http.address() as AddressInfo).port;
  const resourceUrl = options.resourceUrl ?? new URL(`http://localhost:${port}/mcp`);
  const allowedHosts = options.allowedHosts ?? [...new Set(['localhost', '127.0.0.1', '[::1]', resourceUrl.hostname])];
  const mcpPath = resourceUrl.pathname;
  const resourceMetadataUrl = getOAuthProtectedResourceMetadataUrl(resourceUrl);

  const app = express();
  app.disable('x-powered-by');
  // Host, then Origin validation run first, before auth and before the body is read.
  app.use(hostHeaderValidation(allowedHosts));
  app.use(mcpPath, originValidation(options.allowedOrigins));
  app.use(
    mcpAuthMetadataRouter({
      oauthMetadata: options.authorizationServer.metadata,
      resourceServerUrl: resourceUrl,
      scopesSupported: REFERENCE_SCOPES,
      resourceName: 'Quota-guarded help desk (reference MCP server)',
    }),
  );
  const verifier =
    options.verifier ??
    createJwtVerifier({ issuer: options.authorizationServer.issuer, jwksUri: options.authorizationServer.jwksUri, resource: resourceUrl, logger });
  const auth = requireBearerAuth({ verifier, resourceMetadataUrl, expectedResource: resourceUrl });
  const handler = createMcpHandler(options.createServer, {
    // Reporting only: the SDK has answered already (a header mismatch, an unsupported revision, ...).
    onerror: (error) => logger.info({ reason: error.message }, 'MCP request rejected or failed'),
  });
  const serve = toNodeHandler(handler, { onerror: (error) => logger.error({ err: error }, 'MCP request failed') });
  const checkRoutingHeaders = routingHeaders({
    mode: options.routingHeaders ?? 'required',
    logger,
    ...(options.audit === undefined ? {} : { audit: options.audit }),
  });
  // Authentication before the body is read: an anonymous request costs no parsing.
  app.all(mcpPath, auth, express.json({ limit: MAX_BODY_BYTES }), jsonDepthLimit(logger), checkRoutingHeaders, (req, res) => void serve(req, res, req.body));
  app.use(notFound);
  app.use(errorHandler(logger));
  http.on('request', app);

  logger.info(
    { host: options.host, port, resource: resourceUrl.href, authorizationServer: options.authorizationServer.issuer },
    'MCP Streamable HTTP listening',
  );
  return {
    port,
    resourceUrl,
    async close() {
      await handler.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
