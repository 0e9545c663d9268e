import type { SecureServerOptions } from 'node:http2';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { ServerCredentials } from '@grpc/grpc-js';
import { ConfigError } from '../config/env.js';
import { watchConfigFiles } from '../config/file-watcher.js';
import { certificateSummary, checkKeyPair, pemCertificates, readPem, type PemFile } from '../config/pem-files.js';
import type { Logger } from '../logger.js';

export interface TlsFiles {
  cert?: string | undefined;
  key?: string | undefined;
  /** Set: mutual TLS, callers must present a certificate this CA signed. */
  clientCa?: string | undefined;
}

export interface ServerTls {
  credentials: ServerCredentials;
  /** Stops watching the files (nothing to stop for plaintext or without `reload`). */
  close(): void;
}

/**
 * Server credentials from PEM files: plaintext when none is set, TLS with
 * cert+key, mTLS with a client CA too. A bad setting or file throws a
 * ConfigError naming its variable.
 *
 * With `reload`, the files are watched (src/config/file-watcher.ts): a renewed
 * certificate (cert-manager rewriting its Secret, the kubelet swapping the
 * volume) is served to new connections without a restart, open connections
 * keep theirs, and files that do not make a valid set (a key that does not
 * match its certificate, a half-written file) are refused with a warning while
 * the loaded ones stay in force.
 */
export function serverTls(files: TlsFiles, reload?: { logger: Logger; debounceMs?: number }): ServerTls {
  if (files.cert === undefined && files.key === undefined) {
    if (files.clientCa !== undefined) throw invalid('QUOTA_TLS_CLIENT_CA', 'needs QUOTA_TLS_CERT and QUOTA_TLS_KEY (mutual TLS is TLS first)');
    return { credentials: ServerCredentials.createInsecure(), close: () => {} };
  }
  if (files.cert === undefined) throw invalid('QUOTA_TLS_CERT', 'required with QUOTA_TLS_KEY');
  if (files.key === undefined) throw invalid('QUOTA_TLS_KEY', 'required with QUOTA_TLS_CERT');
  const named: [string, string][] = [
    ['QUOTA_TLS_CERT', files.cert],
    ['QUOTA_TLS_KEY', files.key],
    ...(files.clientCa === undefined ? [] : [['QUOTA_TLS_CLIENT_CA', files.clientCa] as [string, string]]),
  ];
  let pems: PemFile[];
  let context: SecureContextOptions;
  try {
    pems = named.map(([variable, path]) => readPem(variable, path));
    context = secureContext(pems);
  } catch (error) {
    throw new ConfigError(`invalid configuration:\n  ${(error as Error).message}`);
  }
  const credentials = new ReloadableServerCredentials(files.clientCa !== undefined, context);
  if (reload === undefined) return { credentials, close: () => {} };
  const watcher = watchConfigFiles({
    paths: named.map(([, path]) => path),
    loadedTexts: pems.map(({ pem }) => pem.toString('utf8')),
    logger: reload.logger,
    ...(reload.debounceMs === undefined ? {} : { debounceMs: reload.debounceMs }),
    parse: (texts) => secureContext(named.map(([variable, path], i) => ({ variable, path, pem: Buffer.from(texts[i] as string) }))),
    onReload: (next) => credentials.replace(next),
    describe: (next) => ({ certificate: certificateSummary(next.cert as Buffer) }),
    messages: {
      unreadable: 'TLS files unreadable: keeping the loaded certificate',
      rejected: 'TLS reload rejected: keeping the loaded certificate',
      reloaded: 'TLS certificate reloaded: new connections get it',
      watchFailed: 'TLS file watch failed: certificate reload stopped',
    },
  });
  return { credentials, close: () => watcher.close() };
}

/**
 * The secure context of [cert, key, client CA?] PEM files, checked as the Redis
 * TLS files are (src/config/pem-files.ts): certificates that parse, a key that
 * is the certificate's. Throws "VARIABLE: why", never a file's content.
 */
function secureContext([cert, key, clientCa]: readonly PemFile[]): SecureContextOptions {
  checkKeyPair(cert!, key!);
  if (clientCa !== undefined) pemCertificates(clientCa);
  const context = { cert: cert!.pem, key: key!.pem, ...(clientCa === undefined ? {} : { ca: clientCa.pem }) };
  // As the server will take them: a context grpc-js could not set would refuse every new connection.
  try {
    createSecureContext(context);
  } catch (error) {
    throw new Error(`${cert!.variable}, ${key!.variable}: Node's TLS refused them (${(error as Error).message})`);
  }
  return context;
}

/**
 * TLS server credentials whose certificate, key and client CA can be replaced
 * while serving: grpc-js hands each replacement to its servers
 * (setSecureContext), so new connections get it and open ones keep theirs.
 * The server options are those ServerCredentials.createSsl sets.
 */
class ReloadableServerCredentials extends ServerCredentials {
  constructor(requestClientCertificate: boolean, context: SecureContextOptions) {
    const options: SecureServerOptions = { requestCert: requestClientCertificate, ciphers: process.env.GRPC_SSL_CIPHER_SUITES };
    super(options, context);
  }

  replace(context: SecureContextOptions): void {
    this.updateSecureContextOptions(context);
  }

  _equals(other: ServerCredentials): boolean {
    return other === this;
  }
}

const invalid = (variable: string, message: string) => new ConfigError(`invalid configuration:\n  ${variable}: ${message}`);
