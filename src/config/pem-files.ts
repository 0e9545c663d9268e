import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';

/**
 * PEM files named by a variable (QUOTA_TLS_*, QUOTA_REDIS_TLS_*): read and
 * checked the same way for the gRPC port and for Redis, at start-up and on
 * every reload. Errors read "VARIABLE: why", name the path and never hold a
 * file's contents.
 */

/** One PEM file: the variable that names it, its path, its bytes. */
export interface PemFile {
  variable: string;
  path: string;
  pem: Buffer;
}

export function readPem(variable: string, path: string): PemFile {
  try {
    return { variable, path, pem: readFileSync(path) };
  } catch (error) {
    // The system message names the path and the reason (ENOENT, EACCES, EISDIR), nothing of the contents.
    throw fault(variable, `cannot read ${path}: ${(error as Error).message}`);
  }
}

/** Every PEM certificate in the file, parsed; at least one. */
export function pemCertificates({ variable, path, pem }: PemFile): X509Certificate[] {
  const blocks = pem.toString('latin1').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw fault(variable, `${path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  return blocks.map((block, index) => {
    try {
      return new X509Certificate(block);
    } catch (error) {
      throw fault(variable, `${path}: certificate ${index + 1} of ${blocks.length} does not parse (${(error as Error).message})`);
    }
  });
}

/** A certificate chain (leaf first) and its private key: each parses, and the key is the leaf's. */
export function checkKeyPair(cert: PemFile, key: PemFile): void {
  const [leaf] = pemCertificates(cert);
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key.pem);
  } catch (error) {
    throw fault(key.variable, `${key.path} is not a usable PEM private key (${(error as Error).message}; encrypted keys are not supported)`);
  }
  if (!leaf!.checkPrivateKey(privateKey)) {
    throw fault(key.variable, `${key.path} is not the private key of the certificate in ${cert.variable} (${cert.path})`);
  }
}

/** A certificate as an operator checks that a renewal took: whose, until when (no key material). */
export function certificateSummary(pem: Buffer | string): Record<string, string> {
  const certificate = new X509Certificate(pem);
  return { subject: certificate.subject.replace(/\n/g, ', '), notAfter: certificate.validTo, sha256: certificate.fingerprint256 };
}

const fault = (variable: string, message: string) => new Error(`${variable}: ${message}`);
