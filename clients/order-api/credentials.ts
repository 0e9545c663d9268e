import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { z } from 'zod';

export interface Principal {
  user: string;
  tenant: string;
}

/** What the request's credentials say; `kind` is safe to log, the credential never is. */
export type Authentication =
  | { kind: 'none' }
  | { kind: 'invalid'; scheme: 'bearer' | 'api_key' | 'unknown' }
  | { kind: 'ok'; scheme: 'bearer' | 'api_key'; principal: Principal };

const principalSchema = z.strictObject({ user: z.string().min(1).max(256), tenant: z.string().min(1).max(256) });
const fileSchema = z.strictObject({
  bearer_tokens: z.record(z.string().min(8), principalSchema).default({}),
  api_keys: z.record(z.string().min(8), principalSchema).default({}),
});

/**
 * Bearer tokens (Authorization: Bearer <token>) and API keys (X-API-Key) from
 * a credentials file. Secrets are held only as SHA-256 digests, so a heap
 * dump or a stray log line of this object shows no credential.
 */
export class Credentials {
  private constructor(
    private readonly tokens: ReadonlyMap<string, Principal>,
    private readonly keys: ReadonlyMap<string, Principal>,
  ) {}

  static async load(path: string): Promise<Credentials> {
    const parsed = fileSchema.safeParse(parse(await readFile(path, 'utf8')));
    if (!parsed.success) {
      throw new Error(`${path}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    }
    const digests = (entries: Record<string, Principal>) => new Map(Object.entries(entries).map(([secret, p]) => [digest(secret), p]));
    return new Credentials(digests(parsed.data.bearer_tokens), digests(parsed.data.api_keys));
  }

  authenticate(headers: Record<string, string | string[] | undefined>): Authentication {
    const authorization = headers.authorization;
    const apiKey = headers['x-api-key'];
    if (typeof authorization === 'string' && authorization !== '') {
      const match = /^Bearer ([\x21-\x7e]+)$/.exec(authorization);
      if (match === null) return { kind: 'invalid', scheme: 'unknown' };
      const principal = this.tokens.get(digest(match[1]!));
      return principal ? { kind: 'ok', scheme: 'bearer', principal } : { kind: 'invalid', scheme: 'bearer' };
    }
    if (typeof apiKey === 'string' && apiKey !== '') {
      const principal = this.keys.get(digest(apiKey));
      return principal ? { kind: 'ok', scheme: 'api_key', principal } : { kind: 'invalid', scheme: 'api_key' };
    }
    if (authorization !== undefined || apiKey !== undefined) return { kind: 'invalid', scheme: 'unknown' };
    return { kind: 'none' };
  }
}

/** Map lookups by digest: the comparison never touches the secret itself. */
function digest(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}
