import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDevClients } from '../../../clients/mcp-server/dev-issuer/dev-clients.js';
import { type RunningDevIssuer, startDevIssuer } from '../../../clients/mcp-server/dev-issuer/dev-issuer.js';

// The development authorization server on real HTTP: what it grants, and the OAuth
// error (RFC 6749 5.2, RFC 8707) it answers for each kind of bad token request.

const RESOURCE = 'http://localhost:3333/mcp';
let issuer: RunningDevIssuer;
beforeAll(async () => {
  issuer = await startDevIssuer({
    host: '127.0.0.1',
    port: 0,
    clients: await loadDevClients('config/mcp-dev-clients.yaml'),
    logger: pino({ level: 'silent' }),
  });
});
afterAll(async () => {
  await issuer?.close();
});

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
async function tokenRequest(form: Record<string, string | string[]>, headers: Record<string, string> = {}) {
  const body = new URLSearchParams();
  for (const [name, value] of Object.entries(form)) for (const one of [value].flat()) body.append(name, one);
  const response = await fetch(`${issuer.issuer}/token`, { method: 'POST', headers, body });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

describe('the development authorization server', () => {
  it('grants client credentials: a JWT access token for the requested resource, with the client’s principal and the scopes it may have', async () => {
    const granted = await tokenRequest(
      { grant_type: 'client_credentials', resource: RESOURCE, scope: 'tickets:write admin:everything' },
      { authorization: basic('alice-cli', 'dev-alice-secret') },
    );
    expect(granted.status).toBe(200);
    expect(granted.headers.get('cache-control')).toBe('no-store');
    expect(granted.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'tickets:write' });
    const jwks = (await (await fetch(`${issuer.issuer}/jwks`)).json()) as Parameters<typeof createLocalJWKSet>[0];
    const token = String(granted.body['access_token']);
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: 'ES256', typ: 'at+jwt' });
    const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), { issuer: issuer.issuer, audience: RESOURCE });
    expect(payload).toMatchObject({ sub: 'alice', tenant: 'acme', roles: ['agent'], client_id: 'alice-cli', scope: 'tickets:write' });
    expect(payload.exp! - payload.iat!).toBe(3600);

    // Credentials in the form work too; without `scope`, every scope the client may have.
    const all = await tokenRequest({ grant_type: 'client_credentials', resource: RESOURCE, client_id: 'bob-cli', client_secret: 'dev-bob-secret' });
    expect(all.body['scope']).toBe('tickets:read customers:read');
  });

  it('refuses bad requests with the OAuth error that names the problem, and keeps serving', async () => {
    const alice = { authorization: basic('alice-cli', 'dev-alice-secret') };
    const cases: [Record<string, string | string[]>, Record<string, string>, number, string, RegExp][] = [
      [{ grant_type: 'client_credentials', resource: RESOURCE }, {}, 401, 'invalid_client', /client authentication is required/],
      [{ grant_type: 'client_credentials', resource: RESOURCE }, { authorization: basic('alice-cli', 'wrong') }, 401, 'invalid_client', /wrong secret/],
      [
        { grant_type: 'client_credentials', resource: RESOURCE, client_id: 'alice-cli', client_secret: 'dev-alice-secret' },
        alice,
        400,
        'invalid_request',
        /one client authentication method/,
      ],
      [{ grant_type: 'authorization_code', resource: RESOURCE }, alice, 400, 'unsupported_grant_type', /client_credentials only/],
      [{ grant_type: 'client_credentials' }, alice, 400, 'invalid_target', /resource is required/],
      [{ grant_type: 'client_credentials', resource: 'http://localhost:3333/mcp#x' }, alice, 400, 'invalid_target', /without a fragment/],
      [{ grant_type: 'client_credentials', resource: 'mcp-server' }, alice, 400, 'invalid_target', /absolute http\(s\) URL/],
      [{ grant_type: 'client_credentials', resource: [RESOURCE, 'https://other.example/mcp'] }, alice, 400, 'invalid_target', /one absolute/],
    ];
    for (const [form, headers, status, error, description] of cases) {
      const refused = await tokenRequest(form, headers);
      expect(refused.status, JSON.stringify(form)).toBe(status);
      expect(refused.body['error']).toBe(error);
      expect(String(refused.body['error_description'])).toMatch(description);
      if (status === 401) expect(refused.headers.get('www-authenticate')).toBe('Basic realm="dev-issuer"');
    }
    const unreadable = await fetch(`${issuer.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'x'.repeat(20_000),
    });
    expect(unreadable.status).toBe(400);
    expect(await unreadable.json()).toEqual({ error: 'invalid_request', error_description: 'unreadable request body' });
    expect((await tokenRequest({ grant_type: 'client_credentials', resource: RESOURCE }, alice)).status).toBe(200);
  });

  it('has no user login: its authorization endpoint says so', async () => {
    const response = await fetch(`${issuer.issuer}/authorize?response_type=code&client_id=alice-cli`);
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'unsupported_response_type' });
  });

  it('a bad client file fails to load, naming the field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dev-clients-'));
    try {
      const file = join(dir, 'clients.yaml');
      await writeFile(file, 'clients:\n  - client_id: a\n    client_secret: short\n    subject: a\n');
      await expect(loadDevClients(file)).rejects.toThrow(/clients\.0\.client_secret: must be at least 8 characters/);
      await writeFile(file, 'clients:\n  - {client_id: a, client_secret: s-12345678, subject: a}\n  - {client_id: a, client_secret: s-12345678, subject: b}\n');
      await expect(loadDevClients(file)).rejects.toThrow(/client_id a is listed twice/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
