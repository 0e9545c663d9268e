import type { OAuthMetadata } from '@modelcontextprotocol/server';
import { z } from 'zod';

const metadataSchema = z.looseObject({
  issuer: z.string(),
  token_endpoint: z.url().optional(),
  jwks_uri: z.url({ error: 'the authorization server metadata has no jwks_uri: its tokens cannot be verified here' }),
});

/** What the MCP server needs of its authorization server: the metadata it mirrors and where its keys are. */
export interface AuthorizationServer {
  issuer: string;
  jwksUri: URL;
  metadata: OAuthMetadata;
}

/**
 * Fetches the authorization server's metadata: RFC 8414
 * (`/.well-known/oauth-authorization-server`, inserted before the issuer's path),
 * else OpenID Connect discovery (`/.well-known/openid-configuration` after it), as
 * MCP clients look for it. The document must name the same issuer (RFC 8414 3.3),
 * or a server impersonating it could hand out its own keys.
 */
export async function discoverAuthorizationServer(issuer: string, fetchFn: typeof fetch = fetch): Promise<AuthorizationServer> {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/$/, '');
  const candidates = [new URL(`/.well-known/oauth-authorization-server${path}`, url.origin), new URL(`${path}/.well-known/openid-configuration`, url.origin)];
  const failures: string[] = [];
  for (const candidate of candidates) {
    let response: Response;
    try {
      response = await fetchFn(candidate, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(10_000) });
    } catch (error) {
      failures.push(`${candidate.href}: ${error instanceof Error ? error.message : String(error)}`);
      continue;
    }
    if (!response.ok) {
      failures.push(`${candidate.href}: HTTP ${response.status}`);
      await response.body?.cancel();
      continue;
    }
    const parsed = metadataSchema.safeParse(await response.json().catch(() => undefined));
    if (!parsed.success)
      throw new Error(`authorization server metadata at ${candidate.href} is invalid: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
    if (parsed.data.issuer !== issuer) {
      throw new Error(`authorization server metadata at ${candidate.href} names issuer ${parsed.data.issuer}, not ${issuer}`);
    }
    return { issuer, jwksUri: new URL(parsed.data.jwks_uri), metadata: parsed.data as unknown as OAuthMetadata };
  }
  throw new Error(`no authorization server metadata for ${issuer}:\n  ${failures.join('\n  ')}`);
}
