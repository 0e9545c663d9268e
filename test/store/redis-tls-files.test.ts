import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import { redisTlsOptions, type RedisTlsFiles } from '../../src/store/redis/redis-tls.js';
import { CLIENT, createTestCertificates } from '../support/test-certificates.js';

/** QUOTA_REDIS_TLS_* files are read and checked at start: a bad one names its variable, never its contents. */
describe('Redis TLS files (src/store/redis/redis-tls.ts)', () => {
  const certificates = createTestCertificates();
  const { file } = certificates;
  beforeAll(() => {
    certificates.authority('ca');
    certificates.issue('client', 'ca', CLIENT);
    certificates.issue('other', 'ca', CLIENT);
    writeFileSync(file('bundle.crt'), Buffer.concat([certificates.pem('ca.crt'), certificates.pem('other.crt')]));
    writeFileSync(file('garbage.crt'), '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
  });
  afterAll(() => certificates.remove());

  /** The message of what redisTlsOptions threw, checked to hold none of the files' PEM lines. */
  const failure = (files: RedisTlsFiles): string => {
    try {
      redisTlsOptions(files);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const message = (error as Error).message;
      for (const name of ['ca.crt', 'client.crt', 'client.key', 'other.key']) {
        for (const line of certificates
          .pem(name)
          .toString()
          .split('\n')
          .filter((l) => l.length > 20 && !l.startsWith('-----'))) {
          expect(message).not.toContain(line);
        }
      }
      return message;
    }
    throw new Error('expected a ConfigError');
  };

  it('none set: no TLS options (a rediss:// URL then trusts the system CAs)', () => {
    expect(redisTlsOptions({})).toBeUndefined();
  });

  it('reads a CA bundle and a client certificate with its key', () => {
    const options = redisTlsOptions({ ca: file('bundle.crt'), cert: file('client.crt'), key: file('client.key') });
    expect(options).toEqual({ ca: certificates.pem('bundle.crt'), cert: certificates.pem('client.crt'), key: certificates.pem('client.key') });
    expect(options).not.toHaveProperty('rejectUnauthorized');
  });

  it.each([
    ['a missing CA file', () => ({ ca: '/nonexistent/ca.pem' }), /^invalid configuration:\n {2}QUOTA_REDIS_TLS_CA: cannot read \/nonexistent\/ca\.pem: ENOENT/],
    ['a directory as CA', () => ({ ca: certificates.dir }), /^invalid configuration:\n {2}QUOTA_REDIS_TLS_CA: cannot read .*: EISDIR/],
    ['a key given as CA', () => ({ ca: file('client.key') }), /QUOTA_REDIS_TLS_CA: .*client\.key holds no PEM certificate/],
    ['a CA that does not parse', () => ({ ca: file('garbage.crt') }), /QUOTA_REDIS_TLS_CA: .*garbage\.crt: certificate 1 of 1 does not parse/],
    [
      'a missing client certificate',
      () => ({ cert: '/nonexistent/client.crt', key: file('client.key') }),
      /QUOTA_REDIS_TLS_CERT: cannot read \/nonexistent\/client\.crt/,
    ],
    [
      'a missing client key',
      () => ({ cert: file('client.crt'), key: '/nonexistent/client.key' }),
      /QUOTA_REDIS_TLS_KEY: cannot read \/nonexistent\/client\.key/,
    ],
    [
      'a certificate given as key',
      () => ({ cert: file('client.crt'), key: file('client.crt') }),
      /QUOTA_REDIS_TLS_KEY: .*client\.crt is not a usable PEM private key/,
    ],
    [
      'the key of another certificate',
      () => ({ cert: file('client.crt'), key: file('other.key') }),
      /QUOTA_REDIS_TLS_KEY: .*other\.key is not the private key of the certificate in QUOTA_REDIS_TLS_CERT/,
    ],
    ['a certificate without its key', () => ({ cert: file('client.crt') }), /QUOTA_REDIS_TLS_KEY: QUOTA_REDIS_TLS_CERT and QUOTA_REDIS_TLS_KEY go together/],
  ])('refuses %s, naming the variable', (_case, files, expected) => {
    expect(failure(files())).toMatch(expected);
  });
});
