import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import type { RunningApi } from './order-api.js';

/** One HTTP/1.1 request as bytes on the wire; `headers` as in post() (for example ALICE). */
export function rawRequest(method: string, path: string, headers: Record<string, string> = {}, body?: unknown): string {
  const text = body === undefined ? '' : JSON.stringify(body);
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: orders.test'];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  if (body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(text)}`);
  return `${lines.join('\r\n')}\r\n\r\n${text}`;
}

/** POST /api/orders of one widget, as bytes. */
export const rawOrder = (headers: Record<string, string>): string => rawRequest('POST', '/api/orders', headers, { sku: 'widget', quantity: 1 });

/** A keep-alive connection to the API; nothing reads what arrives until readResponses() is called. */
export async function openConnection(api: RunningApi): Promise<Socket> {
  const { hostname, port } = new URL(api.url);
  const socket = connect(Number(port), hostname);
  await once(socket, 'connect');
  return socket;
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Reads `count` responses from `socket`, in order (each with a Content-Length, as Fastify sends them), then closes it. */
export async function readResponses(socket: Socket, count: number): Promise<RawResponse[]> {
  const responses: RawResponse[] = [];
  let buffer = Buffer.alloc(0);
  for await (const chunk of socket) {
    buffer = Buffer.concat([buffer, chunk as Buffer]);
    for (;;) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end === -1) break;
      const [statusLine, ...headerLines] = buffer.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (buffer.length < end + 4 + length) break;
      responses.push({ status: Number(statusLine!.split(' ')[1]), headers, body: buffer.subarray(end + 4, end + 4 + length).toString() });
      buffer = buffer.subarray(end + 4 + length);
      if (responses.length === count) return responses;
    }
  }
  throw new Error(`the connection ended after ${responses.length} of ${count} responses`);
}
