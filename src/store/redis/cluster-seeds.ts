import { splitHostPort, unbracket } from '../../config/host-port.js';

/** One Redis Cluster seed, from QUOTA_REDIS_CLUSTER (validated in src/config/env.ts). */
export interface ClusterSeed {
  readonly host: string;
  readonly port: number;
  readonly username?: string;
  readonly password?: string;
  readonly tls: boolean;
}

/** `host:port`, `[ipv6]:port`, or `redis://[user:password@]host:port` (`rediss://` for TLS). */
export function parseClusterSeed(seed: string): ClusterSeed {
  if (seed.includes('://')) {
    const url = new URL(seed);
    return {
      host: unbracket(url.hostname),
      port: Number(url.port),
      ...(url.username === '' ? {} : { username: decodeURIComponent(url.username) }),
      ...(url.password === '' ? {} : { password: decodeURIComponent(url.password) }),
      tls: url.protocol === 'rediss:',
    };
  }
  return { ...splitHostPort(seed), tls: false };
}
