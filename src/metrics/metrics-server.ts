import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { splitHostPort } from '../config/host-port.js';

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

/** What the endpoint serves: a prom-client Registry, or the primary's sum of its workers (src/workers/primary.ts). */
export interface MetricsSource {
  readonly contentType: string;
  metrics(): Promise<string>;
}

/** Serves GET /metrics (Prometheus text format) on `address` (host:port, IPv6 in brackets). */
export async function startMetricsServer(address: string, registry: MetricsSource): Promise<MetricsServer> {
  const { host, port } = splitHostPort(address);
  const server: Server = createServer((request, response) => {
    if (request.method !== 'GET' || request.url?.split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are at GET /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics collection failed\n'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
