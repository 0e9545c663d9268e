import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALICE, startReferenceHttp, toolsCall, type ReferenceHttp } from './http-harness.js';

// DNS rebinding protection, second half: a browser page on another origin must not
// drive the server, even when its request reaches an allowed Host.

const call = toolsCall(1, 'bulk_update_tickets', { ticketIds: ['T-404'], status: 'closed' });

describe('Origin validation with the default allowed origins (same origin as the Host)', () => {
  let server: ReferenceHttp;
  let token: string;
  beforeAll(async () => {
    server = await startReferenceHttp();
    token = await server.token(ALICE);
  });
  afterAll(async () => {
    await server?.close();
  });

  const forbidden = (origin: string) => ({ jsonrpc: '2.0', error: { code: -32000, message: `Invalid Origin: ${origin}` }, id: null });

  it('a foreign Origin gets 403 JSON before authentication and before the body is read', async () => {
    for (const origin of ['http://evil.example', `http://evil.example:${server.port}`, 'null']) {
      for (const auth of [{}, { authorization: `Bearer ${token}` }] as Record<string, string>[]) {
        const response = await server.raw('POST', { ...call.headers, host: `localhost:${server.port}`, origin, ...auth }, call.body);
        expect(response.status).toBe(403);
        expect(response.headers['content-type']).toMatch(/^application\/json/);
        expect(JSON.parse(response.body)).toEqual(forbidden(origin));
      }
    }
    // Malformed JSON would be a 400 if the body were parsed first.
    const unparsed = await server.raw('POST', { host: `localhost:${server.port}`, origin: 'http://evil.example' }, '{not json');
    expect(unparsed.status).toBe(403);
  });

  it("another port on the same host is another origin (403); the server's own origin and no Origin are served", async () => {
    const response = await server.raw(
      'POST',
      { ...call.headers, host: `localhost:${server.port}`, origin: 'http://localhost:8080', authorization: `Bearer ${token}` },
      call.body,
    );
    expect(response.status).toBe(403);
    expect(JSON.parse(response.body)).toEqual(forbidden('http://localhost:8080'));
    // The server's own origin (same host and port as the Host header, either scheme) and no Origin at all are served.
    for (const host of [`localhost:${server.port}`, `127.0.0.1:${server.port}`]) {
      for (const origin of [`http://${host}`, `https://${host}`]) {
        expect((await server.raw('POST', { ...call.headers, host, origin, authorization: `Bearer ${token}` }, call.body)).status).toBe(200);
      }
    }
    expect((await server.raw('POST', { ...call.headers, authorization: `Bearer ${token}` }, call.body)).status).toBe(200);
  });

  it('an SDK client sending a foreign Origin cannot connect; one without Origin can', async () => {
    await expect(server.connect(ALICE, { headers: { Origin: 'http://evil.example' } })).rejects.toThrow(/403|Invalid Origin/);
    const client = await server.connect(ALICE);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });
});

describe('Origin validation with configured allowed origins', () => {
  let server: ReferenceHttp;
  beforeAll(async () => {
    server = await startReferenceHttp({ transport: { allowedOrigins: ['https://inspector.example', 'http://localhost:6274'] } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('only the listed origins are served', async () => {
    const auth = { authorization: `Bearer ${await server.token(ALICE)}` };
    for (const origin of ['https://inspector.example', 'http://localhost:6274']) {
      expect((await server.raw('POST', { ...call.headers, origin, ...auth }, call.body)).status).toBe(200);
    }
    for (const origin of [`http://127.0.0.1:${server.port}`, 'http://inspector.example', 'https://inspector.example:8443']) {
      expect((await server.raw('POST', { ...call.headers, origin, ...auth }, call.body)).status).toBe(403);
    }
  });
});
