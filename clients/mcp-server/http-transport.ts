import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server as HttpServer } from 'node:http';
import { metadataHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/metadata.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import type { OAuthTokenVerifier } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import { getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { hostHeaderValidation } from '@modelcontextprotocol/sdk/server/middleware/hostHeaderValidation.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import { principalFromAuthInfo } from '@quota-service/mcp';
import { errorHandler, jsonRpcError, MAX_BODY_BYTES, notFound } from './http-errors.js';
import { originValidation } from './origin-validation.js';
import { DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, DEFAULT_SESSION_IDLE_TIMEOUT_MS, SessionRegistry } from './sessions.js';

export interface HttpTransportOptions {
  /** Interface to bind, e.g. 127.0.0.1. */
  host: string;
  /** 0 picks a free port. */
  port: number;
  /**
   * The server's canonical URL (RFC 8707 resource / token audience), e.g.
   * https://mcp.example.com/mcp. Only tokens issued for it are accepted; its
   * path is where MCP is served.
   */
  resourceUrl: URL;
  /** Host header names accepted (DNS rebinding protection). */
  allowedHosts: string[];
  /**
   * Origin header values accepted on the MCP endpoint, exactly. Unset: the
   * server's own origin only (same host and port as the Host header).
   */
  allowedOrigins?: string[];
  /** Authorization servers named in the protected resource metadata. */
  authorizationServers: string[];
  verifier: OAuthTokenVerifier;
  /** A fresh McpServer per session. */
  createServer: () => McpServer;
  logger: Logger;
  /** A session with no request for this long is closed. Default 15 minutes. */
  sessionIdleTimeoutMs?: number;
  /** Open sessions one principal may hold; past it, initialize gets 429. Default 16. */
  maxSessionsPerPrincipal?: number;
  /** The clock of session expiry (ms since the epoch); tests move it. Default Date.now. */
  now?: () => number;
}

export interface RunningHttpServer {
  port: number;
  close(): Promise<void>;
}

/** A failed bind in words, naming the cause the operator can act on. */
const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'address in use (another process listens there)',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EADDRNOTAVAIL: 'no network interface of this machine has that address',
};

/**
 * Streamable HTTP with the protections the MCP spec asks of a remote server:
 * Host and Origin header validation, bearer tokens checked for this resource (audience),
 * protected resource metadata (RFC 9728) for clients to discover the authorization
 * server, and sessions bound to the principal that opened them, closed when idle
 * and capped per principal (sessions.ts). Every error answer is JSON
 * (http-errors.ts): no stack traces or paths, whatever NODE_ENV says.
 */
export async function startHttpTransport(options: HttpTransportOptions): Promise<RunningHttpServer> {
  const { logger } = options;
  const app = express();
  app.disable('x-powered-by');
  const mcpPath = options.resourceUrl.pathname;
  // Host, then Origin validation run first, before auth and before the body is read.
  app.use(hostHeaderValidation(options.allowedHosts));
  app.use(mcpPath, originValidation(options.allowedOrigins));
  app.use(express.json({ limit: MAX_BODY_BYTES }));
  const resourceMetadataUrl = getOAuthProtectedResourceMetadataUrl(options.resourceUrl);

  app.use(
    new URL(resourceMetadataUrl).pathname,
    metadataHandler({
      resource: options.resourceUrl.href,
      authorization_servers: options.authorizationServers,
      bearer_methods_supported: ['header'],
      scopes_supported: ['tickets:read', 'tickets:write', 'customers:read'],
      resource_name: 'Quota-guarded help desk (reference MCP server)',
    }),
  );

  const auth = requireBearerAuth({ verifier: options.verifier, resourceMetadataUrl, expectedResource: options.resourceUrl });
  const idleTimeoutMs = options.sessionIdleTimeoutMs ?? DEFAULT_SESSION_IDLE_TIMEOUT_MS;
  const maxPerPrincipal = options.maxSessionsPerPrincipal ?? DEFAULT_MAX_SESSIONS_PER_PRINCIPAL;
  const sessions = new SessionRegistry({ idleTimeoutMs, maxPerPrincipal }, options.now ?? Date.now, (error) =>
    logger.warn({ err: error }, 'closing an expired MCP session failed'),
  );
  // Sessions nobody comes back to are closed by this sweep (and whenever a session opens).
  const sweeper = setInterval(() => sessions.sweep(), Math.min(60_000, idleTimeoutMs)).unref();
  const ownerOf = (req: Request) => {
    const principal = principalFromAuthInfo(req.auth!);
    return `${principal.clientId ?? ''}\u0000${principal.subject}`;
  };

  const handle = async (req: Request, res: Response) => {
    const sessionId = req.header('mcp-session-id');
    try {
      if (sessionId !== undefined) {
        const session = sessions.find(sessionId);
        if (session === undefined) return jsonRpcError(res, 404, -32001, 'Session not found');
        if (session.owner !== ownerOf(req)) return jsonRpcError(res, 403, -32000, 'Session belongs to another principal');
        const done = sessions.begin(session);
        // A GET holds the server-to-client stream open for as long as the client likes:
        // it counts as activity when it starts, but does not keep the session busy.
        if (req.method === 'GET') done();
        else res.once('close', done);
        return await session.transport.handleRequest(req, res, req.body);
      }
      if (req.method !== 'POST' || !isInitializeRequest(req.body)) {
        return jsonRpcError(res, 400, -32000, 'Bad Request: No valid session ID provided');
      }
      const slot = sessions.reserve(ownerOf(req));
      if ('retryAfterMs' in slot) {
        const seconds = Math.max(1, Math.ceil(slot.retryAfterMs / 1000));
        res.setHeader('Retry-After', String(seconds));
        const message = `Too many open sessions for this principal (limit ${maxPerPrincipal}): close one (HTTP DELETE with its Mcp-Session-Id) or retry after ${seconds} s`;
        return jsonRpcError(res, 429, -32000, message);
      }
      try {
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => slot.bind(id, transport),
        });
        transport.onclose = () => {
          if (transport.sessionId !== undefined) sessions.remove(transport.sessionId);
        };
        await options.createServer().connect(transport);
        await transport.handleRequest(req, res, req.body);
      } finally {
        slot.release();
      }
    } catch (error) {
      logger.error({ err: error, method: req.method }, 'MCP request failed');
      if (!res.headersSent) jsonRpcError(res, 500, -32603, 'Internal server error');
    }
  };
  app.post(mcpPath, auth, handle);
  app.get(mcpPath, auth, handle);
  app.delete(mcpPath, auth, handle);
  app.use(notFound);
  app.use(errorHandler(logger));

  const http = await new Promise<HttpServer>((resolve, reject) => {
    const listening = app.listen(options.port, options.host, (error?: NodeJS.ErrnoException) =>
      error
        ? reject(
            new Error(`MCP_HTTP_HOST, MCP_HTTP_PORT: cannot listen on ${options.host}:${options.port}: ${LISTEN_ERRORS[error.code ?? ''] ?? error.message}`),
          )
        : resolve(listening),
    );
  });
  const port = (http.address() as AddressInfo).port;
  logger.info({ host: options.host, port, resource: options.resourceUrl.href }, 'MCP Streamable HTTP listening');
  return {
    port,
    async close() {
      clearInterval(sweeper);
      await sessions.closeAll();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
