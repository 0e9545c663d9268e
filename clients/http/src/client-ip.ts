import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import proxyaddr from 'proxy-addr';

/**
 * The client address of a request: X-Forwarded-For is believed
 * only hop by hop through `trustedProxies` (addresses, CIDR ranges, or the
 * proxy-addr names "loopback", "linklocal", "uniquelocal"); a peer outside
 * them is the client, whatever header it sent. Default: trust nobody, so the
 * socket's peer address is the client.
 *
 * Walking X-Forwarded-For from the right, an entry that is not an IPv4
 * (dotted decimal) or IPv6 address ends the walk: the hop before it, a
 * trusted proxy (the socket's peer if it is the first entry), is the client.
 * So the answer is always an address, never text a client put in the header.
 */
export function clientIpResolver(trustedProxies: readonly string[] = []): (request: IncomingMessage) => string {
  const trust = proxyaddr.compile([...trustedProxies]);
  return (request) => {
    // The socket's peer, then each forwarded hop up to the first one not trusted.
    const hops = proxyaddr.all(request, trust);
    for (let i = 1; i < hops.length; i++) if (isIP(hops[i]!) === 0) return hops[i - 1]!;
    return hops[hops.length - 1]!;
  };
}
