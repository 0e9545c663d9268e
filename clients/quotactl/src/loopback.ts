/**
 * Whether a gRPC target (`host:port`, `[::1]:port`, `ipv4:127.0.0.1:port`,
 * `dns:///localhost:port`, `unix:/path`) stays on this machine. A host name is
 * not resolved: only `localhost` counts, so that a name pointing elsewhere can
 * never pass for loopback.
 */
export function isLoopbackTarget(target: string): boolean {
  if (/^unix(-abstract)?:/i.test(target)) return true;
  const rest = target.replace(/^(dns|ipv4|ipv6):(\/\/[^/]*\/)?/i, '');
  // ipv4: and ipv6: targets may list several addresses: each must be loopback.
  return rest.split(',').every((address) => isLoopbackHost(hostOf(address.trim())));
}

function hostOf(address: string): string {
  const bracket = /^\[([^\]]+)\](?::\d*)?$/.exec(address);
  if (bracket !== null) return bracket[1]!;
  // More than one colon without brackets: an IPv6 address without a port.
  if (address.indexOf(':') !== address.lastIndexOf(':')) return address;
  const colon = address.lastIndexOf(':');
  return colon === -1 ? address : address.slice(0, colon);
}

function isLoopbackHost(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  if (name === 'localhost') return true;
  const v4 = name.replace(/^::ffff:/, '');
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4)) return true;
  return name === '::1' || /^(0{1,4}:){7}0{0,3}1$/.test(name);
}
