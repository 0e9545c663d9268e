import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { ConfigError } from '../config/env.js';

/** PEM file paths from QUOTA_REDIS_TLS_CA, QUOTA_REDIS_TLS_CERT, QUOTA_REDIS_TLS_KEY (src/config/env.ts checked the combinations). */
export interface RedisTlsFiles {
  ca?: string | undefined;
  cert?: string | undefined;
  key?: string | undefined;
}

/**
 * TLS options for the connections to Redis (every node of a cluster alike), read
 * once at start-up; undefined when no file is set (a rediss:// URL then trusts the
 * system CAs, as before). Each file is checked here, so a wrong path, a file that is
 * no PEM, or a key that does not belong to the certificate stops the start with the
 * variable's name instead of failing every reconnect later. Messages name the path,
 * never the contents. Server verification stays on: Node checks the chain against
 * `ca` and the certificate's subjectAltName against the host or IP connected to.
 */
export function redisTlsOptions(files: RedisTlsFiles): ConnectionOptions | undefined {
  if (files.ca === undefined && files.cert === undefined && files.key === undefined) return undefined;
  if ((files.cert === undefined) !== (files.key === undefined)) {
    throw invalid(files.cert === undefined ? 'QUOTA_REDIS_TLS_CERT' : 'QUOTA_REDIS_TLS_KEY', 'QUOTA_REDIS_TLS_CERT and QUOTA_REDIS_TLS_KEY go together');
  }
  const options: ConnectionOptions = {};
  if (files.ca !== undefined) {
    const ca = read('QUOTA_REDIS_TLS_CA', files.ca);
    certificates('QUOTA_REDIS_TLS_CA', files.ca, ca);
    options.ca = ca;
  }
  if (files.cert !== undefined && files.key !== undefined) {
    const cert = read('QUOTA_REDIS_TLS_CERT', files.cert);
    const key = read('QUOTA_REDIS_TLS_KEY', files.key);
    const [leaf] = certificates('QUOTA_REDIS_TLS_CERT', files.cert, cert);
    let privateKey: KeyObject;
    try {
      privateKey = createPrivateKey(key);
    } catch (error) {
      throw invalid('QUOTA_REDIS_TLS_KEY', `${files.key} is not a usable PEM private key (${(error as Error).message}; encrypted keys are not supported)`);
    }
    if (!leaf!.checkPrivateKey(privateKey)) {
      throw invalid('QUOTA_REDIS_TLS_KEY', `${files.key} is not the private key of the certificate in QUOTA_REDIS_TLS_CERT (${files.cert})`);
    }
    options.cert = cert;
    options.key = key;
  }
  return options;
}

function read(variable: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    // The system message names the path and the reason (ENOENT, EACCES, EISDIR), nothing of the contents.
    throw invalid(variable, `cannot read ${path}: ${(error as Error).message}`);
  }
}

/** Every PEM certificate in the file, parsed; at least one. */
function certificates(variable: string, path: string, pem: Buffer): X509Certificate[] {
  const blocks = pem.toString('latin1').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw invalid(variable, `${path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  return blocks.map((block, index) => {
    try {
      return new X509Certificate(block);
    } catch (error) {
      throw invalid(variable, `${path}: certificate ${index + 1} of ${blocks.length} does not parse (${(error as Error).message})`);
    }
  });
}

const invalid = (variable: string, message: string) => new ConfigError(`invalid configuration:\n  ${variable}: ${message}`);

/** For the start-up log line: how the connections to Redis are secured (no paths, no contents). */
export function redisTlsMode(config: { QUOTA_REDIS_URL?: string | undefined; QUOTA_REDIS_CLUSTER?: readonly string[] | undefined } & RedisTlsVariables): string {
  const address = config.QUOTA_REDIS_URL ?? config.QUOTA_REDIS_CLUSTER?.[0] ?? '';
  if (!address.includes('://') || new URL(address).protocol !== 'rediss:') return 'off';
  const ca = config.QUOTA_REDIS_TLS_CA === undefined ? 'system CAs' : 'QUOTA_REDIS_TLS_CA';
  return config.QUOTA_REDIS_TLS_CERT === undefined ? `verified against ${ca}` : `verified against ${ca}, client certificate`;
}

interface RedisTlsVariables {
  QUOTA_REDIS_TLS_CA?: string | undefined;
  QUOTA_REDIS_TLS_CERT?: string | undefined;
}
