import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthTokenVerifier } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { VirtualClock } from '@quota-service/core';
import type { AuditRecord } from '@quota-service/mcp';
import { loadDevCredentials } from '../../../clients/mcp-server/dev-tokens.js';
import { HelpDesk } from '../../../clients/mcp-server/help-desk.js';
import { startHttpTransport, type HttpTransportOptions } from '../../../clients/mcp-server/http-transport.js';
import { createReferenceServer, type ReferenceServerDeps } from '../../../clients/mcp-server/reference-server.js';
import { loadPolicyFile } from '../../../src/config/policies.js';
import { MemoryStore } from '../../../src/store/memory.js';
import { startTestService, type TestService } from '../../support/quota-service.js';
import { T0 } from '../../support/store-fixtures.js';

// Tokens from the shipped dev token file (config/mcp-dev-tokens.yaml).
export const ALICE = 'dev-alice-agent-token';
export const BOB = 'dev-bob-viewer-token';
export const CAROL = 'dev-carol-approver-token';
export const RESOURCE = new URL('http://localhost:3333/mcp');

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** The reference server on real Streamable HTTP, a real quota service behind it, and helpers to talk to it. */
export interface ReferenceHttp {
  base: string;
  port: number;
  /** How many MCP sessions the server closed so far (their McpServer saw the transport close). */
  closedSessions(): number;
  /** An SDK client with this bearer token; `elicit` answers every approval form with yes. */
  connect(
    token: string,
    options?: { elicit?: boolean; headers?: Record<string, string> },
  ): Promise<{ client: Client; transport: StreamableHTTPClientTransport }>;
  /** A raw request, so any header (Host, Origin) and any body can be sent. */
  raw(method: string, headers: Record<string, string>, body?: unknown): Promise<RawResponse>;
  audit(): Promise<AuditRecord[]>;
  close(): Promise<void>;
}

export const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

export async function startReferenceHttp(
  options: {
    transport?: Partial<Omit<HttpTransportOptions, 'createServer' | 'logger' | 'verifier'>>;
    /** Reference server options: signed approvals. */
    server?: Pick<ReferenceServerDeps, 'approvals'>;
    /** Wraps the dev token verifier (e.g. to hold requests until several have arrived). */
    verifier?: (verifier: OAuthTokenVerifier) => OAuthTokenVerifier;
  } = {},
): Promise<ReferenceHttp> {
  const service: TestService = await startTestService(new MemoryStore(new VirtualClock(T0)), await loadPolicyFile('config/mcp-policies.yaml'));
  const quota: QuotaClient = createQuotaClient({ address: `127.0.0.1:${service.server.port}` });
  const dir = await mkdtemp(join(tmpdir(), 'mcp-http-'));
  const credentials = await loadDevCredentials('config/mcp-dev-tokens.yaml');
  const logger = pino({ level: 'silent' });
  const desk = new HelpDesk();
  let closed = 0;
  const http = await startHttpTransport({
    host: '127.0.0.1',
    port: 0,
    resourceUrl: RESOURCE,
    allowedHosts: ['localhost', '127.0.0.1'],
    authorizationServers: [],
    verifier: options.verifier === undefined ? credentials.verifier : options.verifier(credentials.verifier),
    createServer: () => {
      const server = createReferenceServer({ desk, quota, audit: join(dir, 'audit.jsonl'), logger, ...options.server });
      server.server.onclose = () => void closed++;
      return server;
    },
    logger,
    ...options.transport,
  });
  const base = `http://127.0.0.1:${http.port}`;
  const clients: Client[] = [];

  return {
    base,
    port: http.port,
    closedSessions: () => closed,
    async connect(token, connectOptions = {}) {
      const transport = new StreamableHTTPClientTransport(new URL('/mcp', base), {
        requestInit: { headers: { Authorization: `Bearer ${token}`, ...connectOptions.headers } },
      });
      const client = new Client({ name: 'http-test', version: '1.0.0' }, { capabilities: connectOptions.elicit ? { elicitation: { form: {} } } : {} });
      if (connectOptions.elicit) client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { approve: true } }));
      await client.connect(transport);
      clients.push(client);
      return { client, transport };
    },
    raw(method, headers, body) {
      return new Promise((resolve, reject) => {
        const req = request(
          `${base}/mcp`,
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
      await quota.close();
      await service.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
