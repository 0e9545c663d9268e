import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientIpResolver } from '@quota-service/http';

/** A plain HTTP server on 127.0.0.1 that answers the client address clientIpResolver(trusted) finds. */
async function echoServer(trusted: string[]): Promise<{ server: Server; url: string }> {
  const clientIp = clientIpResolver(trusted);
  const server = createServer((request, response) => response.end(clientIp(request)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('clientIpResolver with X-Forwarded-For entries that are no address', () => {
  const servers: Server[] = [];
  let loopback: string;
  let twoHops: string;
  let nobody: string;
  beforeAll(async () => {
    const started = await Promise.all([echoServer(['loopback']), echoServer(['loopback', '10.0.0.0/8']), echoServer([])]);
    for (const { server } of started) servers.push(server);
    [loopback, twoHops, nobody] = started.map((s) => s.url) as [string, string, string];
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });
  const ip = async (url: string, forwarded: string) => (await fetch(url, { headers: { 'x-forwarded-for': forwarded } })).text();

  it('an entry that is not an IPv4 or IPv6 address ends the walk: the last trusted hop before it is the client', async () => {
    const garbage = 'x'.repeat(300);
    // The trusted peer vouches for nothing usable: the peer itself is the client.
    expect(await ip(loopback, garbage)).toBe('127.0.0.1');
    expect(await ip(loopback, '198.51.100.7\t203.0.113.9')).toBe('127.0.0.1');
    expect(await ip(loopback, '198.51.100.7, not-an-address')).toBe('127.0.0.1');
    expect(await ip(loopback, '198.51.100.7:4711')).toBe('127.0.0.1');
    // Only the dotted-decimal and IPv6 forms count: a hex or octal spelling of a trusted address is no address.
    expect(await ip(loopback, '198.51.100.7, 0x7f.0.0.1')).toBe('127.0.0.1');
    expect(await ip(loopback, '198.51.100.7, 0177.0.0.1')).toBe('127.0.0.1');
    // Further out: the walk stops at the garbage, the trusted hop before it is the client.
    expect(await ip(twoHops, `${garbage}, 10.0.0.2`)).toBe('10.0.0.2');
    expect(await ip(twoHops, 'not-an-address, 10.0.0.3, 10.0.0.2')).toBe('10.0.0.3');
    // Valid entries as before: the first untrusted one from the right.
    expect(await ip(twoHops, 'not-an-address, 198.51.100.7, 10.0.0.2')).toBe('198.51.100.7');
    expect(await ip(loopback, '2001:db8::7')).toBe('2001:db8::7');
    expect(await ip(nobody, garbage)).toBe('127.0.0.1');
  });
});
