import { createHash, timingSafeEqual } from 'node:crypto';
import type { DevClient } from './dev-clients.js';

/** An OAuth error answer of the token endpoint (RFC 6749 5.2, RFC 8707 invalid_target). */
export interface TokenError {
  status: 400 | 401;
  error: 'invalid_request' | 'invalid_client' | 'unsupported_grant_type' | 'invalid_target';
  description: string;
}

/** A token request the issuer grants: who, for which resource (audience), with which scopes. */
export interface TokenGrant {
  client: DevClient;
  resource: string;
  scopes: string[];
}

type Form = Record<string, unknown>;

/**
 * Checks a client credentials token request (RFC 6749 4.4): client authentication
 * by HTTP Basic or by form fields (not both), grant_type, exactly one `resource`
 * (RFC 8707: an absolute http(s) URL without a fragment, which becomes the token's
 * audience) and an optional `scope`. The granted scopes are the requested ones the
 * client may have (all of them without `scope`), as RFC 6749 3.3 lets a server
 * issue fewer than asked.
 */
export function checkTokenRequest(form: Form, authorization: string | undefined, clients: readonly DevClient[]): TokenGrant | TokenError {
  const credentials = clientCredentials(form, authorization);
  if ('error' in credentials) return credentials;
  const client = clients.find((candidate) => candidate.client_id === credentials.id);
  // Compared as digests, in constant time: the dev secrets are secrets too.
  if (client === undefined || !sameSecret(client.client_secret, credentials.secret)) {
    return { status: 401, error: 'invalid_client', description: 'unknown client or wrong secret' };
  }
  if (form['grant_type'] !== 'client_credentials') {
    return { status: 400, error: 'unsupported_grant_type', description: 'this development issuer grants client_credentials only' };
  }
  const resource = form['resource'];
  if (resource === undefined) return { status: 400, error: 'invalid_target', description: 'resource is required: the URL of the MCP server the token is for' };
  if (typeof resource !== 'string' || !isResourceIndicator(resource)) {
    return { status: 400, error: 'invalid_target', description: 'resource must be one absolute http(s) URL without a fragment' };
  }
  const scope = form['scope'];
  if (scope !== undefined && typeof scope !== 'string') return { status: 400, error: 'invalid_request', description: 'scope must be given once' };
  const requested = scope === undefined ? client.scopes : scope.split(' ').filter((part) => part !== '');
  return { client, resource, scopes: client.scopes.filter((allowed) => requested.includes(allowed)) };
}

function clientCredentials(form: Form, authorization: string | undefined): { id: string; secret: string } | TokenError {
  const inForm = form['client_id'] !== undefined || form['client_secret'] !== undefined;
  const unauthenticated: TokenError = {
    status: 401,
    error: 'invalid_client',
    description: 'client authentication is required (HTTP Basic or client_id and client_secret)',
  };
  if (authorization !== undefined) {
    if (inForm) return { status: 400, error: 'invalid_request', description: 'use one client authentication method, not two' };
    const match = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(authorization.trim());
    if (match === null) return unauthenticated;
    const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return unauthenticated;
    // RFC 6749 2.3.1: both parts are form-urlencoded before they are joined.
    try {
      return { id: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')), secret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')) };
    } catch {
      return unauthenticated;
    }
  }
  const { client_id: id, client_secret: secret } = form;
  if (typeof id !== 'string' || typeof secret !== 'string') return unauthenticated;
  return { id, secret };
}

const digest = (value: string) => createHash('sha256').update(value).digest();
const sameSecret = (expected: string, given: string) => timingSafeEqual(digest(expected), digest(given));

function isResourceIndicator(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hash === '' && !value.includes('#');
  } catch {
    return false;
  }
}
