import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthTokenVerifier } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { parse } from 'yaml';
import { z } from 'zod';
import type { Principal } from '@quota-service/mcp';

const name = z.string().min(1).max(256);
const principalFields = {
  subject: name,
  tenant: name.optional(),
  scopes: z.array(name).default([]),
  roles: z.array(name).default([]),
};

const fileSchema = z.object({
  tokens: z
    .array(
      z.object({
        ...principalFields,
        token: z.string().min(16, 'tokens must be at least 16 characters'),
        client_id: name,
        audience: z.url(),
      }),
    )
    .default([]),
  stdio_principal: z.object(principalFields).optional(),
});

export interface DevCredentials {
  verifier: OAuthTokenVerifier;
  /** The principal of stdio sessions, if the file names one. */
  stdioPrincipal?: Principal;
}

/** How long a dev token is reported valid from the moment it is checked (the SDK requires an expiry). */
const DEV_TOKEN_TTL_S = 3600;

const digest = (token: string) => createHash('sha256').update(token).digest('hex');

/**
 * Loads the development token file (config/mcp-dev-tokens.yaml). Tokens are kept
 * only as SHA-256 digests in memory, so a heap dump or a stray log of this object
 * does not reveal them. A bad file fails with the field named.
 */
export async function loadDevCredentials(path: string): Promise<DevCredentials> {
  const parsed = fileSchema.safeParse(parse(await readFile(path, 'utf8')));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`invalid dev token file ${path}:\n${lines.join('\n')}`);
  }
  const byDigest = new Map<string, Omit<AuthInfo, 'token' | 'expiresAt'>>();
  for (const entry of parsed.data.tokens) {
    byDigest.set(digest(entry.token), {
      clientId: entry.client_id,
      scopes: entry.scopes,
      resource: new URL(entry.audience),
      extra: { subject: entry.subject, roles: entry.roles, ...(entry.tenant === undefined ? {} : { tenant: entry.tenant }) },
    });
  }
  const verifier: OAuthTokenVerifier = {
    async verifyAccessToken(token) {
      const known = byDigest.get(digest(token));
      if (known === undefined) throw new InvalidTokenError('Unknown token');
      // The audience is reported, and requireBearerAuth's expectedResource compares it.
      return { ...known, token, expiresAt: Math.floor(Date.now() / 1000) + DEV_TOKEN_TTL_S };
    },
  };
  const stdio = parsed.data.stdio_principal;
  return {
    verifier,
    ...(stdio === undefined
      ? {}
      : {
          stdioPrincipal: { subject: stdio.subject, scopes: stdio.scopes, roles: stdio.roles, ...(stdio.tenant === undefined ? {} : { tenant: stdio.tenant }) },
        }),
  };
}
