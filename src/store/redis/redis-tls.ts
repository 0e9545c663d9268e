import type { ConnectionOptions } from 'node:tls';
import { ConfigError } from '../../config/env.js';
import { watchConfigFiles } from '../../config/file-watcher.js';
import { certificateSummary, checkKeyPair, pemCertificates, readPem, type PemFile } from '../../config/pem-files.js';
import type { Logger } from '../../logger.js';

/** PEM file paths from QUOTA_REDIS_TLS_CA, QUOTA_REDIS_TLS_CERT, QUOTA_REDIS_TLS_KEY (src/config/env.ts checked the combinations). */
export interface RedisTlsFiles {
  ca?: string | undefined;
  cert?: string | undefined;
  key?: string | undefined;
}

/**
 * TLS options for the connections to Redis (every node of a cluster alike), read
 * at start-up; undefined when no file is set (a rediss:// URL then trusts the
 * system CAs, as before). Each file is checked here, so a wrong path, a file that is
 * no PEM, or a key that does not belong to the certificate stops the start with the
 * variable's name instead of failing every reconnect later. Messages name the path,
 * never the contents. Server verification stays on: Node checks the chain against
 * `ca` and the certificate's subjectAltName against the host or IP connected to.
 * watchRedisTls keeps the returned object up to date when the files change.
 */
export function redisTlsOptions(files: RedisTlsFiles): ConnectionOptions | undefined {
  if (files.ca === undefined && files.cert === undefined && files.key === undefined) return undefined;
  if ((files.cert === undefined) !== (files.key === undefined)) {
    throw invalid(files.cert === undefined ? 'QUOTA_REDIS_TLS_CERT' : 'QUOTA_REDIS_TLS_KEY', 'QUOTA_REDIS_TLS_CERT and QUOTA_REDIS_TLS_KEY go together');
  }
  try {
    return checkedOptions(files, readPem);
  } catch (error) {
    throw new ConfigError(`invalid configuration:\n  ${(error as Error).message}`);
  }
}

/**
 * Reload of the Redis TLS files, as the policy file reloads: when a file changes
 * (a renewed client certificate in a Secret volume), all are read and checked as
 * at start-up, and a valid set is written into `live`, the very object the Redis
 * client was given: ioredis reads it on every (re)connect, so the next connection
 * to each node presents the new certificate; open connections keep theirs (Redis
 * checks a client certificate at the handshake only). An invalid set is refused
 * with a warning and the loaded one stays.
 */
export function watchRedisTls(options: { files: RedisTlsFiles; live: ConnectionOptions; logger: Logger; debounceMs?: number }): { close(): void } {
  const named = (['ca', 'cert', 'key'] as const).filter((name) => options.files[name] !== undefined);
  const paths = named.map((name) => options.files[name] as string);
  return watchConfigFiles({
    paths,
    // redisTlsOptions set each named file's bytes as a Buffer.
    loadedTexts: named.map((name) => (options.live[name] as Buffer).toString('utf8')),
    logger: options.logger,
    ...(options.debounceMs === undefined ? {} : { debounceMs: options.debounceMs }),
    parse: (texts) => checkedOptions(options.files, (variable, path) => ({ variable, path, pem: Buffer.from(texts[paths.indexOf(path)] as string) })),
    onReload: (next) => Object.assign(options.live, next),
    describe: (next) => (next.cert === undefined ? {} : { certificate: certificateSummary(next.cert as Buffer) }),
    messages: {
      unreadable: 'Redis TLS files unreadable: keeping the loaded ones',
      rejected: 'Redis TLS reload rejected: keeping the loaded files',
      reloaded: 'Redis TLS files reloaded: the next connection to each node uses them',
      watchFailed: 'Redis TLS file watch failed: reload stopped',
    },
  });
}

/** The options from the files' contents (`load` gives each file), each checked; throws "VARIABLE: why". */
function checkedOptions(files: RedisTlsFiles, load: (variable: string, path: string) => PemFile): ConnectionOptions {
  const options: ConnectionOptions = {};
  if (files.ca !== undefined) {
    const ca = load('QUOTA_REDIS_TLS_CA', files.ca);
    pemCertificates(ca);
    options.ca = ca.pem;
  }
  if (files.cert !== undefined && files.key !== undefined) {
    const cert = load('QUOTA_REDIS_TLS_CERT', files.cert);
    const key = load('QUOTA_REDIS_TLS_KEY', files.key);
    checkKeyPair(cert, key);
    options.cert = cert.pem;
    options.key = key.pem;
  }
  return options;
}

const invalid = (variable: string, message: string) => new ConfigError(`invalid configuration:\n  ${variable}: ${message}`);

/** For the start-up log line: how the connections to Redis are secured (no paths, no contents). */
export function redisTlsMode(
  config: { QUOTA_REDIS_URL?: string | undefined; QUOTA_REDIS_CLUSTER?: readonly string[] | undefined } & RedisTlsVariables,
): string {
  const address = config.QUOTA_REDIS_URL ?? config.QUOTA_REDIS_CLUSTER?.[0] ?? '';
  if (!address.includes('://') || new URL(address).protocol !== 'rediss:') return 'off';
  const ca = config.QUOTA_REDIS_TLS_CA === undefined ? 'system CAs' : 'QUOTA_REDIS_TLS_CA';
  return config.QUOTA_REDIS_TLS_CERT === undefined ? `verified against ${ca}` : `verified against ${ca}, client certificate`;
}

interface RedisTlsVariables {
  QUOTA_REDIS_TLS_CA?: string | undefined;
  QUOTA_REDIS_TLS_CERT?: string | undefined;
}
