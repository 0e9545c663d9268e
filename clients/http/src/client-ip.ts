import type { IncomingMessage } from 'node:http';
import proxyaddr from 'proxy-addr';

/**
 * The client address of a request: X-Forwarded-For is believed
 * only hop by hop through `trustedProxies` (addresses, CIDR ranges, or the
 * proxy-addr names "loopback", "linklocal", "uniquelocal"); a peer outside
 * them is the client, whatever header it sent. Default: trust nobody, so the
 * socket's peer address is the client.
 */
export function clientIpResolver(trustedProxies: readonly string[] = []): (request: IncomingMessage) => string {
  const trust = proxyaddr.compile([...trustedProxies]);
  return (request) => proxyaddr(request, trust);
}
