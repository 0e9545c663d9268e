import type { AuthInfo } from '@modelcontextprotocol/server';
import type { Request, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { type AuditRecord, type AuditSink, principalFromAuthInfo, redactArgumentValues, writeAuditRecord } from '@quota-service/mcp/v2';
import { jsonRpcError, requestIdOf } from './http-errors.js';

/**
 * How the MCP endpoint treats the `Mcp-Method` and `Mcp-Name` request headers,
 * which name a call so that a gateway can route or limit it without reading the
 * body. The SDK checks them only on requests of the 2026-07-28 revision; a client
 * that claims a 2025-era revision (or none) would otherwise be served without them.
 *
 * - `required`: every `tools/call` carries both headers, equal to its body,
 *   whatever revision it claims; JSON-RPC batches are refused (one set of headers
 *   cannot name several calls). Safe behind a gateway that limits by the headers.
 * - `optional`: 2025-era requests may leave the headers out (their revisions do
 *   not define them) and may be batches without them; 2026-07-28 ones still need
 *   them. Not safe behind such a gateway.
 *
 * In both modes a `tools/call` whose headers are present must agree with them.
 */
export type RoutingHeadersMode = 'required' | 'optional';

/** HeaderMismatch, as the 2026-07-28 revision defines it (answered with HTTP 400). */
const HEADER_MISMATCH = -32020;
const INVALID_REQUEST = -32600;
const MISMATCH_PREFIX = 'Bad Request: the request headers and body disagree: ';

const SENTINEL_PREFIX = '=?base64?';
const SENTINEL_SUFFIX = '?=';

/**
 * The `Mcp-Name` value a client writes for `value`: the value itself when it is a
 * plain ASCII field value, else its UTF-8 in base64 inside `=?base64?…?=`. The
 * header must be exactly this text: a gateway compares the text, so a name that
 * could be written two ways (`create_ticket` in base64) would be two names to it.
 */
export function headerForm(value: string): string {
  let plain = value !== '' && value === value.trim() && !(value.startsWith(SENTINEL_PREFIX) && value.endsWith(SENTINEL_SUFFIX));
  for (let i = 0; plain && i < value.length; i++) {
    const c = value.charCodeAt(i);
    plain = c === 9 || (c >= 32 && c <= 126);
  }
  return plain ? value : `${SENTINEL_PREFIX}${Buffer.from(value, 'utf8').toString('base64')}${SENTINEL_SUFFIX}`;
}

interface RoutingHeaders {
  version: string | undefined;
  method: string | undefined;
  name: string | undefined;
  /** A routing header that came more than once. */
  repeated: string | undefined;
}

interface Problem {
  code: number;
  message: string;
}

/** A client-chosen value in a message: quoted, and cut short. */
const shown = (value: string) => JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

function routingHeadersOf(req: Request): RoutingHeaders {
  let methodCount = 0;
  let nameCount = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const header = req.rawHeaders[i]!.toLowerCase();
    if (header === 'mcp-method') methodCount++;
    else if (header === 'mcp-name') nameCount++;
  }
  const value = (header: string) => {
    const raw = req.headers[header];
    return Array.isArray(raw) ? raw.join(', ') : raw;
  };
  return {
    version: value('mcp-protocol-version'),
    method: value('mcp-method'),
    name: value('mcp-name'),
    repeated: methodCount > 1 ? 'Mcp-Method' : nameCount > 1 ? 'Mcp-Name' : undefined,
  };
}

/** The per-request envelope key that names a 2026-07-28 (or later) request's revision. */
const ENVELOPE_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';

/**
 * Whether a message claims the 2026-07-28 revision or a later one, which require
 * the headers of every request (in its envelope, or in MCP-Protocol-Version).
 */
function claimsHeaderRevision(message: Record<string, unknown>, versionHeader: string | undefined): boolean {
  const params = message['params'];
  const meta = isObject(params) ? params['_meta'] : undefined;
  if (isObject(meta) && meta[ENVELOPE_VERSION_KEY] !== undefined) return true;
  // Revisions are dates: the text compares as they do.
  return versionHeader !== undefined && versionHeader >= '2026-07-28';
}

/**
 * Why the headers do not name a tools/call message, or undefined. Other messages
 * run no tool: their headers are left to the SDK, which checks them on 2026-07-28
 * requests; a 2025-era client may send one tool's headers on every request of its
 * session (static headers, as the MCP Inspector's `--header` sends them).
 */
function mismatchOf(message: Record<string, unknown>, headers: RoutingHeaders, mode: RoutingHeadersMode): string | undefined {
  if (message['method'] !== 'tools/call') return undefined;
  const required = mode === 'required' || claimsHeaderRevision(message, headers.version);
  if (headers.method === undefined) {
    if (required) return 'the body calls a tool but the required Mcp-Method header is absent';
  } else if (headers.method !== 'tools/call') {
    return `the body names method "tools/call" but the Mcp-Method header names ${shown(headers.method)}`;
  }
  const params = message['params'];
  const name = isObject(params) ? params['name'] : undefined;
  if (typeof name !== 'string')
    return required || headers.name !== undefined ? 'the body’s params.name is not a string, so no Mcp-Name header can name it' : undefined;
  if (headers.name === undefined) {
    return required ? `the body calls tool ${shown(name)} but the required Mcp-Name header is absent` : undefined;
  }
  const expected = headerForm(name);
  if (headers.name === expected) return undefined;
  return `the body carries params.name=${shown(name)} but the Mcp-Name header is ${shown(headers.name)} (it must be ${shown(expected)})`;
}

function problemOf(body: unknown, headers: RoutingHeaders, mode: RoutingHeadersMode): Problem | undefined {
  if (Array.isArray(body)) {
    if (mode === 'required') {
      return {
        code: INVALID_REQUEST,
        message: 'Bad Request: JSON-RPC batches are not accepted: send each message in a request of its own, named by its Mcp-Method and Mcp-Name headers',
      };
    }
    if (headers.method !== undefined || headers.name !== undefined) {
      return {
        code: INVALID_REQUEST,
        message: 'Bad Request: a JSON-RPC batch cannot carry Mcp-Method or Mcp-Name: one set of headers cannot name several messages',
      };
    }
    return undefined;
  }
  if (!isObject(body) || body['method'] !== 'tools/call') return undefined;
  // Which of two values a gateway took is anyone's guess.
  if (headers.repeated !== undefined) return { code: HEADER_MISMATCH, message: `${MISMATCH_PREFIX}the ${headers.repeated} header is given more than once` };
  const mismatch = mismatchOf(body, headers, mode);
  return mismatch === undefined ? undefined : { code: HEADER_MISMATCH, message: `${MISMATCH_PREFIX}${mismatch}` };
}

/** The tools/call messages of a body: the message itself, or the batch's. */
function toolCallsOf(body: unknown): Record<string, unknown>[] {
  const messages = Array.isArray(body) ? body : [body];
  return messages.filter((message): message is Record<string, unknown> => isObject(message) && message['method'] === 'tools/call');
}

/** A POST whose body the JSON parser left alone although it has one (a media type it does not take). */
const unparsedBody = (req: Request) =>
  req.body === undefined && (req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0');

/**
 * Checks the routing headers of every POST to the MCP endpoint against its parsed
 * body, before the SDK sees it, on every protocol revision (see RoutingHeadersMode).
 * A refusal is HTTP 400 with a JSON-RPC error (-32020 HeaderMismatch, or -32600 for
 * a batch), nothing runs, and each tools/call it carried is audited as refused.
 */
export function routingHeaders(options: { mode: RoutingHeadersMode; audit?: AuditSink; logger: Logger }): RequestHandler {
  const { mode, audit, logger } = options;
  return (req, res, next) => {
    if (req.method !== 'POST') return next();
    // The check must see what the SDK would serve: a body only the SDK would read is refused, as the SDK itself would.
    if (unparsedBody(req)) return jsonRpcError(res, 415, -32000, 'Unsupported Media Type: Content-Type must be application/json');
    const problem = problemOf(req.body, routingHeadersOf(req), mode);
    if (problem === undefined) return next();
    logger.info({ reason: problem.message }, 'MCP request refused: routing headers');
    const calls = toolCallsOf(req.body);
    const reason = `${problem.message.replace(/^Bad Request: /, '')}: answered 400`;
    const write =
      audit === undefined || calls.length === 0 ? Promise.resolve() : auditRefusals(audit, calls, (req as Request & { auth?: AuthInfo }).auth, reason, logger);
    void write.finally(() => jsonRpcError(res, 400, problem.code, problem.message, requestIdOf(req.body)));
  };
}

async function auditRefusals(audit: AuditSink, calls: Record<string, unknown>[], auth: AuthInfo | undefined, reason: string, logger: Logger): Promise<void> {
  const principal = auth === undefined ? null : principalFromAuthInfo(auth);
  for (const call of calls) {
    const params = isObject(call['params']) ? call['params'] : {};
    const id = call['id'];
    const record: AuditRecord = {
      time: new Date().toISOString(),
      tool: typeof params['name'] === 'string' ? params['name'] : '',
      requestId: typeof id === 'string' || typeof id === 'number' ? id : '',
      principal:
        principal === null
          ? null
          : {
              subject: principal.subject,
              ...(principal.tenant === undefined ? {} : { tenant: principal.tenant }),
              ...(principal.clientId === undefined ? {} : { clientId: principal.clientId }),
            },
      arguments: redactArgumentValues(params['arguments']),
      steps: {
        validation: 'not_checked',
        authentication: auth === undefined ? 'failed' : 'passed',
        permission: 'not_checked',
        approval: 'not_checked',
        quota: { outcome: 'not_checked' },
      },
      result: 'refused',
      reason,
      durationMs: 0,
    };
    await writeAuditRecord(audit, record, logger);
  }
}
