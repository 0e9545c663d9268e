/** A host as written in an address or URL, an IPv6 one in brackets, without them. */
export function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** A listen or connect address, `host:port` with an IPv6 host in brackets, as its host (brackets off) and port. */
export function splitHostPort(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':');
  return { host: unbracket(address.slice(0, colon)), port: Number(address.slice(colon + 1)) };
}
