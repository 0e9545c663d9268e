import { readFileSync } from 'node:fs';
import { ServerCredentials } from '@grpc/grpc-js';
import { ConfigError } from '../config/env.js';

export interface TlsFiles {
  cert?: string | undefined;
  key?: string | undefined;
  /** Set: mutual TLS, callers must present a certificate this CA signed. */
  clientCa?: string | undefined;
}

/** Server credentials from PEM files: plaintext when none is set, TLS with cert+key, mTLS with a client CA too. */
export function serverCredentials(files: TlsFiles): ServerCredentials {
  if (files.cert === undefined && files.key === undefined) {
    if (files.clientCa !== undefined) throw invalid('QUOTA_TLS_CLIENT_CA', 'needs QUOTA_TLS_CERT and QUOTA_TLS_KEY (mutual TLS is TLS first)');
    return ServerCredentials.createInsecure();
  }
  if (files.cert === undefined) throw invalid('QUOTA_TLS_CERT', 'required with QUOTA_TLS_KEY');
  if (files.key === undefined) throw invalid('QUOTA_TLS_KEY', 'required with QUOTA_TLS_CERT');
  const read = (variable: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw invalid(variable, `cannot read ${path}: ${(error as Error).message}`);
    }
  };
  const cert = read('QUOTA_TLS_CERT', files.cert);
  const key = read('QUOTA_TLS_KEY', files.key);
  const clientCa = files.clientCa === undefined ? null : read('QUOTA_TLS_CLIENT_CA', files.clientCa);
  return ServerCredentials.createSsl(clientCa, [{ cert_chain: cert, private_key: key }], clientCa !== null);
}

const invalid = (variable: string, message: string) => new ConfigError(`invalid configuration:\n  ${variable}: ${message}`);
