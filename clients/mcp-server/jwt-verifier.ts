import { type AuthInfo, OAuthError, OAuthErrorCode, type OAuthTokenVerifier } from '@modelcontextprotocol/server';
import { createRemoteJWKSet, errors, type JWTPayload, jwtVerify } from 'jose';
import type { Logger } from 'pino';

export interface JwtVerifierOptions {
  /** The authorization server's issuer identifier: tokens must carry it as `iss`. */
  issuer: string;
  /** Where its signing keys are (the metadata's `jwks_uri`). */
  jwksUri: URL;
  /** This server's resource URL: tokens must name it in `aud` (RFC 8707). */
  resource: URL;
  logger: Logger;
}

/** Asymmetric algorithms only: a token signed with a shared secret (HS*) or none is refused. */
const ALGORITHMS = ['ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'RS256', 'RS384', 'RS512', 'EdDSA', 'Ed25519'];

/**
 * Verifies JWT access tokens (RFC 9068) of one authorization server: signature
 * from its JWKS, `typ: at+jwt` (so an ID token is not taken for an access token),
 * issuer, expiry, and audience = this server's resource URL. The result is the
 * SDK's AuthInfo with the principal under `extra` (`subject` from `sub`, `tenant`,
 * `roles`), as the guard reads it. A refused token is an `invalid_token` OAuth
 * error (the SDK answers 401); keys that cannot be fetched are a `server_error`
 * (500), logged, since no client can fix that.
 */
export function createJwtVerifier(options: JwtVerifierOptions): OAuthTokenVerifier {
  const keys = createRemoteJWKSet(options.jwksUri);
  const audience = options.resource.href;
  return {
    async verifyAccessToken(token: string): Promise<AuthInfo> {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          issuer: options.issuer,
          audience,
          typ: 'at+jwt',
          algorithms: ALGORITHMS,
          requiredClaims: ['sub', 'exp'],
        }));
      } catch (error) {
        if (error instanceof errors.JOSEError && !keysUnavailable(error)) {
          throw new OAuthError(OAuthErrorCode.InvalidToken, reasonOf(error));
        }
        options.logger.error({ err: error, jwksUri: options.jwksUri.href }, 'access token could not be verified: signing keys unavailable');
        throw new OAuthError(OAuthErrorCode.ServerError, 'The authorization server could not be reached to verify the token');
      }
      const scope = typeof payload['scope'] === 'string' ? payload['scope'] : '';
      const clientId = typeof payload['client_id'] === 'string' ? payload['client_id'] : payload.sub!;
      const roles = Array.isArray(payload['roles']) ? payload['roles'].filter((role): role is string => typeof role === 'string') : [];
      const tenant = typeof payload['tenant'] === 'string' ? payload['tenant'] : undefined;
      return {
        token,
        clientId,
        scopes: scope.split(' ').filter((part) => part !== ''),
        expiresAt: payload.exp!,
        // jwtVerify checked the audience; reported so the SDK's own resource check agrees.
        resource: new URL(audience),
        extra: { subject: payload.sub!, roles, ...(tenant === undefined ? {} : { tenant }) },
      };
    },
  };
}

/** The authorization server's keys could not be had: not the token's fault. */
const keysUnavailable = (error: errors.JOSEError) =>
  error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid || error.code === 'ERR_JOSE_GENERIC';

/** The error description of a refused token: what is wrong, never the token. */
function reasonOf(error: errors.JOSEError): string {
  if (error instanceof errors.JWTExpired) return 'Token has expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return 'Token was not issued for this resource';
    if (error.claim === 'iss') return 'Token was not issued by this server’s authorization server';
    if (error.claim === 'typ') return 'Not an access token (typ must be at+jwt)';
    return `Token claim ${error.claim} is invalid`;
  }
  if (error instanceof errors.JWSSignatureVerificationFailed || error instanceof errors.JWKSNoMatchingKey) return 'Token signature is not valid';
  return 'Invalid token';
}
