import { randomUUID } from 'node:crypto';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type ErrorRequestHandler } from 'express';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { Logger } from 'pino';
import type { DevClient } from './dev-clients.js';
import { checkTokenRequest } from './token-request.js';

export interface DevIssuerOptions {
  /** Interface to bind, e.g. 127.0.0.1. */
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** The issuer identifier clients and the MCP server use. Default `http://localhost:<port>`. */
  issuer?: string;
  clients: readonly DevClient[];
  /** Lifetime of an access token. Default one hour. */
  tokenTtlSeconds?: number;
  /** The clock of `iat`/`exp` (ms since the epoch); tests move it. Default Date.now. */
  now?: () => number;
  logger: Logger;
}

export interface RunningDevIssuer {
  /** The issuer identifier (no trailing slash), as the metadata and the tokens name it. */
  issuer: string;
  port: number;
  close(): Promise<void>;
}

/** Signing algorithm of the access tokens (ECDSA P-256: small keys, widely supported). */
export const DEV_ISSUER_ALGORITHM = 'ES256';

/**
 * A development OAuth 2.1 authorization server, for `make run-mcp` and the tests
 * only: authorization server metadata (RFC 8414), a JWKS, and a token endpoint that
 * grants client credentials to the clients of config/mcp-dev-clients.yaml. Access
 * tokens are JWTs (RFC 9068, `typ: at+jwt`) whose audience is the `resource` the
 * client asked for (RFC 8707), signed with a key made at start, so tokens die with
 * the process. There is no user login: its authorization endpoint only explains
 * that. A real deployment uses its identity provider instead.
 */
export async function startDevIssuer(options: DevIssuerOptions): Promise<RunningDevIssuer> {
  const { logger, clients } = options;
  const now = options.now ?? Date.now;
  const ttl = options.tokenTtlSeconds ?? 3600;
  const { privateKey, publicKey } = await generateKeyPair(DEV_ISSUER_ALGORITHM);
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk);
  const jwks = { keys: [{ ...publicJwk, kid, alg: DEV_ISSUER_ALGORITHM, use: 'sig' }] };

  const app = express();
  app.disable('x-powered-by');
  // Bound once the port is known (port 0 picks one).
  let issuer = '';
  const scopesSupported = [...new Set(clients.flatMap((client) => client.scopes))];

  app.get('/.well-known/oauth-authorization-server', (_req, res) => {
    res.json({
      issuer,
      // Required by RFC 8414 for servers with an authorization endpoint, and by MCP
      // clients' metadata parsers: present, but it only says there is no user login.
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      jwks_uri: `${issuer}/jwks`,
      scopes_supported: scopesSupported,
      response_types_supported: [],
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    });
  });
  app.get('/jwks', (_req, res) => void res.json(jwks));
  app.all('/authorize', (_req, res) => {
    res.status(400).json({
      error: 'unsupported_response_type',
      error_description: 'this development issuer has no user login: get a token with the client credentials grant at the token endpoint',
    });
  });
  app.post('/token', express.urlencoded({ extended: false, limit: '16kb' }), async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    const form = typeof req.body === 'object' && req.body !== null ? (req.body as Record<string, unknown>) : {};
    const grant = checkTokenRequest(form, req.headers.authorization, clients);
    if ('error' in grant) {
      if (grant.status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="dev-issuer"');
      logger.info({ error: grant.error }, 'token request refused');
      res.status(grant.status).json({ error: grant.error, error_description: grant.description });
      return;
    }
    const { client, resource, scopes } = grant;
    const issuedAt = Math.floor(now() / 1000);
    const token = await new SignJWT({
      client_id: client.client_id,
      scope: scopes.join(' '),
      roles: client.roles,
      ...(client.tenant === undefined ? {} : { tenant: client.tenant }),
    })
      .setProtectedHeader({ alg: DEV_ISSUER_ALGORITHM, typ: 'at+jwt', kid })
      .setIssuer(issuer)
      .setSubject(client.subject)
      .setAudience(resource)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + ttl)
      .setJti(randomUUID())
      .sign(privateKey);
    logger.info({ clientId: client.client_id, resource, scopes }, 'access token issued');
    res.json({ access_token: token, token_type: 'Bearer', expires_in: ttl, scope: scopes.join(' ') });
  });
  app.use((_req, res) => void res.status(404).json({ error: 'not_found' }));
  // A body the parser refused (malformed, too large): an OAuth error, never Express's HTML page.
  app.use(
    ((_error, _req, res, _next) =>
      void res.status(400).json({ error: 'invalid_request', error_description: 'unreadable request body' })) as ErrorRequestHandler,
  );

  const http = await new Promise<HttpServer>((resolve, reject) => {
    const listening = app.listen(options.port, options.host, (error?: Error) => (error ? reject(error) : resolve(listening)));
  });
  const port = (http.address() as AddressInfo).port;
  issuer = (options.issuer ?? `http://localhost:${port}`).replace(/\/$/, '');
  logger.info({ issuer, port }, 'development authorization server listening (never deploy it)');
  return {
    issuer,
    port,
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
