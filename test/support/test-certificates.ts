import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Throwaway certificate authorities and certificates made by `openssl` in a temp
 * dir, for tests of TLS on the gRPC port and towards Redis: the one place that
 * knows the openssl incantations. Everything is valid for a day and deleted by `remove`.
 */
export interface TestCertificates {
  readonly dir: string;
  /** The path of `<name>` in the dir, e.g. file('ca.crt'). */
  file(name: string): string;
  pem(name: string): Buffer;
  /** A self-signed CA: `<name>.crt` and `<name>.key`. */
  authority(name: string): void;
  /**
   * `<name>.crt` and `<name>.key` signed by CA `ca`, with openssl x509 v3 extension
   * lines, e.g. `subjectAltName=IP:127.0.0.1` or `extendedKeyUsage=clientAuth`.
   */
  issue(name: string, ca: string, extensions: string): void;
  remove(): void;
}

export function createTestCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'quota-certs-'));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  // EC P-256 keys: made in milliseconds where RSA 2048 takes a noticeable fraction of a second each.
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  return {
    dir,
    file,
    pem: (name) => readFileSync(file(name)),
    authority(name) {
      openssl('req', '-x509', ...newKey, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '1', '-subj', `/CN=${name}`);
    },
    issue(name, ca, extensions) {
      openssl('req', ...newKey, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
      writeFileSync(file(`${name}.ext`), extensions);
      openssl(
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        `${ca}.crt`,
        '-CAkey',
        `${ca}.key`,
        '-CAcreateserial',
        '-out',
        `${name}.crt`,
        '-days',
        '1',
        '-extfile',
        `${name}.ext`,
      );
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Extension lines for a server certificate valid for 127.0.0.1 and localhost. */
export const LOOPBACK_SERVER = 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n';
/** Extension lines for a client certificate (mTLS, Redis tls-auth-clients). */
export const CLIENT = 'extendedKeyUsage=clientAuth\n';
