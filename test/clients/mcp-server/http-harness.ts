import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, ClientCredentialsProvider, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { pino, type Logger } from 'pino';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { VirtualClock } from '@quota-service/core';
import { type AuditRecord, type GuardQuota, JsonLinesAuditSink } from '@quota-service/mcp';
import { discoverAuthorizationServer } from '../../../clients/mcp-server/authorization-server.js';
import { type DevClient, loadDevClients } from '../../../clients/mcp-server/dev-issuer/dev-clients.js';
import { startDevIssuer, type RunningDevIssuer } from '../../../clients/mcp-server/dev-issuer/dev-issuer.js';
import { HelpDesk } from '../../../clients/mcp-server/help-desk.js';
import { startHttpTransport, type HttpTransportOptions } from '../../../clients/mcp-server/http-transport.js';
import { createReferenceServer, type ReferenceServerDeps } from '../../../clients/mcp-server/reference-server.js';
import { loadPolicyFile } from '../../../src/config/policies.js';
import { MemoryStore } from '../../../src/store/memory.js';
import { startTestService, type TestService } from '../../support/quota-service.js';
import { T0 } from '../../support/store-fixtures.js';

/** Clients of the shipped development client file (config/mcp-dev-clients.yaml). */
export const ALICE = { id: 'alice-cli', secret: 'dev-alice-secret' };
export const BOB = { id: 'bob-cli', secret: 'dev-bob-secret' };
export const CAROL = { id: 'carol-console', secret: 'dev-carol-secret' };
export type DevCredentials = typeof ALICE;

/** The protocol revision the reference server speaks, and its per-request envelope keys. */
export const REVISION = '2026-07-28';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** The reference server on real Streamable HTTP, its development authorization server, a real quota service, and helpers. */
export interface ReferenceHttp {
  base: string;
  port: number;
  /** The server's resource URL: the audience its tokens must have. */
  resource: URL;
  issuer: RunningDevIssuer;
  /** The quota service the server asks (GetQuota shows its leases). */
  quotaService: TestService;
  /** An access token from the development issuer (client credentials), for `resource` unless told otherwise. */
  token(client: DevCredentials, options?: { resource?: string; scope?: string }): Promise<string>;
  /**
   * A 2.x SDK client pinned to 2026-07-28 that gets its own token: on the first 401
   * it follows the server's resource metadata to the issuer (client credentials).
   * `elicit` answers every approval form with yes.
   */
  connect(client: DevCredentials, options?: { elicit?: boolean; onElicit?: () => void; headers?: Record<string, string> }): Promise<Client>;
  /** A raw request, so any header (Host, Origin, Mcp-Method, ...; an array sends it several times) and any body can be sent. */
  raw(method: string, headers: Record<string, string | string[]>, body?: unknown): Promise<RawResponse>;
  audit(): Promise<AuditRecord[]>;
  close(): Promise<void>;
}

/** A tools/call as a 2026-07-28 client sends it: the per-request envelope in `_meta` and the standard headers. */
export function toolsCall(id: number, name: string, args: Record<string, unknown>, headers: Record<string, string> = {}) {
  return {
    headers: { 'mcp-protocol-version': REVISION, 'mcp-method': 'tools/call', 'mcp-name': name, ...headers },
    body: {
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: {
        name,
        arguments: args,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': REVISION,
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    },
  };
}

export async function startReferenceHttp(
  options: {
    transport?: Partial<Omit<HttpTransportOptions, 'createServer' | 'logger' | 'authorizationServer'>>;
    /** Reference server options: signed approvals. */
    server?: Pick<ReferenceServerDeps, 'approvals'>;
    logger?: Logger;
    /** The issuer's clock (ms since the epoch); default Date.now. */
    issuerNow?: () => number;
    /** What the server gets as its quota client: default the client itself. */
    wrapQuota?: (quota: QuotaClient) => GuardQuota;
    /** Clients the development issuer knows besides those of config/mcp-dev-clients.yaml. */
    extraClients?: DevClient[];
  } = {},
): Promise<ReferenceHttp> {
  const logger = options.logger ?? pino({ level: 'silent' });
  const service: TestService = await startTestService(new MemoryStore(new VirtualClock(T0)), await loadPolicyFile('config/mcp-policies.yaml'));
  const quota: QuotaClient = createQuotaClient({ address: `127.0.0.1:${service.server.port}` });
  const guardQuota = options.wrapQuota?.(quota) ?? quota;
  const dir = await mkdtemp(join(tmpdir(), 'mcp-http-'));
  const issuer = await startDevIssuer({
    host: '127.0.0.1',
    port: 0,
    clients: [...(await loadDevClients('config/mcp-dev-clients.yaml')), ...(options.extraClients ?? [])],
    logger,
    ...(options.issuerNow === undefined ? {} : { now: options.issuerNow }),
  });
  const desk = new HelpDesk();
  // One audit file, as main.ts wires it: the guard's records and the endpoint's refusals.
  const audit = new JsonLinesAuditSink(join(dir, 'audit.jsonl'));
  const http = await startHttpTransport({
    host: '127.0.0.1',
    port: 0,
    authorizationServer: await discoverAuthorizationServer(issuer.issuer),
    audit,
    createServer: () => createReferenceServer({ desk, quota: guardQuota, audit, logger, ...options.server }),
    logger,
    ...options.transport,
  });
  const base = `http://127.0.0.1:${http.port}`;
  const clients: Client[] = [];

  return {
    base,
    port: http.port,
    resource: http.resourceUrl,
    issuer,
    quotaService: service,
    async token(client, tokenOptions = {}) {
      const form = new URLSearchParams({ grant_type: 'client_credentials', resource: tokenOptions.resource ?? http.resourceUrl.href });
      if (tokenOptions.scope !== undefined) form.set('scope', tokenOptions.scope);
      const response = await fetch(`${issuer.issuer}/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString('base64')}` },
        body: form,
      });
      if (!response.ok) throw new Error(`token request failed: ${response.status} ${await response.text()}`);
      return ((await response.json()) as { access_token: string }).access_token;
    },
    async connect(credentials, connectOptions = {}) {
      const authProvider = new ClientCredentialsProvider({ clientId: credentials.id, clientSecret: credentials.secret, expectedIssuer: issuer.issuer });
      const transport = new StreamableHTTPClientTransport(http.resourceUrl, {
        authProvider,
        ...(connectOptions.headers === undefined ? {} : { requestInit: { headers: connectOptions.headers } }),
      });
      const client = new Client(
        { name: 'http-test', version: '1.0.0' },
        { capabilities: connectOptions.elicit ? { elicitation: { form: {} } } : {}, versionNegotiation: { mode: { pin: REVISION } } },
      );
      if (connectOptions.elicit) {
        client.setRequestHandler('elicitation/create', async () => {
          connectOptions.onElicit?.();
          return { action: 'accept', content: { approve: true } };
        });
      }
      await client.connect(transport);
      clients.push(client);
      return client;
    },
    raw(method, headers, body) {
      return new Promise((resolve, reject) => {
        const req = request(
          `${base}${http.resourceUrl.pathname}`,
          { method, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } },
          (res) => {
            let text = '';
            res.on('data', (chunk) => (text += chunk));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
          },
        );
        req.on('error', reject);
        req.end(body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body));
      });
    },
    async audit() {
      return (await readFile(join(dir, 'audit.jsonl'), 'utf8').catch(() => ''))
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as AuditRecord);
    },
    async close() {
      await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
      await http.close();
      await issuer.close();
      await quota.close();
      await service.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
