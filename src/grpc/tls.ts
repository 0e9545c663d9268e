import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { ServerCredentials } from '@grpc/grpc-js';
import type { SecureServerOptions } from 'node:http2';
import { ConfigError } from '../config/env.js';
import { watchConfigFiles } from '../config/file-watcher.js';
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
  const texts = named.map(([variable, path]) => {
    try {
      return readFileSync(path, 'utf8');
    } catch (error) {
      throw invalid(variable, `cannot read ${path}: ${(error as Error).message}`);
    }
  });
  let context: SecureContextOptions;
  try {
    context = secureContext(texts);
  } catch (error) {
    throw new ConfigError(`invalid configuration:\n  ${(error as Error).message}`);
  }
  const credentials = new ReloadableServerCredentials(files.clientCa !== undefined, context);
  if (reload === undefined) return { credentials, close: () => {} };
  const watcher = watchConfigFiles({
    paths: named.map(([, path]) => path),
    loadedTexts: texts,
    logger: reload.logger,
    ...(reload.debounceMs === undefined ? {} : { debounceMs: reload.debounceMs }),
    parse: secureContext,
    onReload: (next) => credentials.replace(next),
    describe: (next) => ({ certificate: describeCertificate(next.cert as string) }),
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
 * The secure context options of [cert, key, client CA?] PEM texts, checked the
 * way Node will use them (createSecureContext: PEM that parses, a key that
 * matches the certificate). Throws naming the variable at fault; the message
 * never holds a file's content.
 */
function secureContext([cert, key, clientCa]: readonly string[]): SecureContextOptions {
  const context: SecureContextOptions = { cert: cert as string, key: key as string, ...(clientCa === undefined ? {} : { ca: clientCa }) };
  // createSecureContext takes a CA text without a certificate in it, and would then refuse every client.
  if (clientCa !== undefined && !clientCa.includes('-----BEGIN CERTIFICATE-----')) throw new Error('QUOTA_TLS_CLIENT_CA: no PEM certificate in it');
  // In createSecureContext's own order (CA, certificate, key), so the first failure names its file.
  const steps: [string, SecureContextOptions][] = [
    ...(clientCa === undefined ? [] : [['QUOTA_TLS_CLIENT_CA', { ca: clientCa }] as [string, SecureContextOptions]]),
    ['QUOTA_TLS_CERT', { cert: context.cert }],
    ['QUOTA_TLS_KEY', context],
  ];
  for (const [variable, options] of steps) {
    try {
      createSecureContext(options);
    } catch (error) {
      throw new Error(`${variable}: ${(error as Error).message}`);
    }
  }
  return context;
}

/** The served certificate as an operator checks a renewal took: whose, until when (no key material). */
function describeCertificate(pem: string): Record<string, string> {
  const certificate = new X509Certificate(pem);
  return { subject: certificate.subject.replace(/\n/g, ', '), notAfter: certificate.validTo, sha256: certificate.fingerprint256 };
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
