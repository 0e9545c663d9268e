import type { Request, RequestHandler } from 'express';
import { jsonRpcError } from './http-errors.js';

/**
 * Origin header validation, the other half of DNS rebinding protection (the Host
 * header is checked by the SDK's hostHeaderValidation). A request without Origin
 * (a non-browser client) passes; one with an Origin that is not allowed gets 403
 * before authentication and before its body is read.
 *
 * `allowedOrigins` lists the accepted origins exactly (`https://app.example`,
 * `http://localhost:6274`). Unset: only the server's own origin is accepted, an
 * Origin naming the same host and port as the request's Host header (which the
 * Host check has already limited to the allowed host names), over http or https.
 *
 * Hand-rolled because the SDK's Origin middleware compares host names only, on any
 * port (a page on http://localhost:8080 would pass for a server on :3333); this
 * compares the whole origin, scheme and port included.
 */
export function originValidation(allowedOrigins: readonly string[] | undefined): RequestHandler {
  const listed = allowedOrigins === undefined ? undefined : new Set(allowedOrigins);
  const allowed = (origin: string, req: Request) => (listed === undefined ? isSameOrigin(origin, req.headers.host) : listed.has(origin));
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (origin === undefined || allowed(origin, req)) return next();
    return jsonRpcError(res, 403, -32000, `Invalid Origin: ${origin}`);
  };
}

/** The port a URL talks to, the scheme's default when none is written. */
const effectivePort = (url: URL) => (url.port !== '' ? url.port : url.protocol === 'https:' ? '443' : '80');

function isSameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    const url = new URL(origin);
    // 'null' (sandboxed frames, file://) does not parse; a path or a non-canonical form is not an Origin.
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== origin) return false;
    // The Host read with the Origin's scheme, so an omitted port means that scheme's default.
    const target = new URL(`${url.protocol}//${host}`);
    return url.hostname === target.hostname && effectivePort(url) === effectivePort(target);
  } catch {
    return false;
  }
}
