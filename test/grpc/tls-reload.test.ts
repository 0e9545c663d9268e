// The gRPC port's certificate, key and client CA reload in place (src/grpc/tls.ts):
// a renewed certificate in a Secret volume (cert-manager) is served to new
// connections without a restart, an open connection keeps working, and files
// that do not make a valid set are refused with the loaded ones kept.
import { connect as tlsConnect } from 'node:tls';
import { ChannelCredentials } from '@grpc/grpc-js';
import { ClientError, createChannel, createClient, Status } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverTls } from '../../src/grpc/tls.js';
import { ConfigMapVolume } from '../support/configmap-volume.js';
import { startServiceProcess, untilServing, type ServiceProcess } from '../support/service-process.js';
import { CLIENT, createTestCertificates, LOOPBACK_SERVER } from '../support/test-certificates.js';

const certificates = createTestCertificates();
const { pem } = certificates;
const text = (name: string) => pem(name).toString('utf8');
const secret = (name: string) => ({ 'tls.crt': text(`${name}.crt`), 'tls.key': text(`${name}.key`) });

const volumes: ConfigMapVolume[] = [];
let service: ServiceProcess | undefined;
beforeAll(() => {
  for (const ca of ['ca', 'next-ca']) certificates.authority(ca);
  for (const server of ['first', 'renewed', 'third']) certificates.issue(server, 'ca', LOOPBACK_SERVER);
  certificates.issue('client', 'ca', CLIENT);
  certificates.issue('next-client', 'next-ca', CLIENT);
});
afterAll(() => {
  service?.signal('SIGKILL');
  for (const volume of volumes) volume.remove();
  certificates.remove();
});

/** The common name of the certificate the port serves to a new TLS connection (ALPN h2, as gRPC). */
function servedName(port: number, client: { key?: Buffer; cert?: Buffer } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', ca: pem('ca.crt'), ALPNProtocols: ['h2'], ...client }, () => {
      const name = socket.getPeerCertificate().subject.CN;
      socket.destroy();
      resolve(String(name));
    });
    socket.on('error', reject);
  });
}

const healthCode = (channel: ReturnType<typeof createChannel>) =>
  createClient(HealthDefinition, channel)
    .check({ service: '' }, { signal: AbortSignal.timeout(5_000) })
    .then(
      () => 'OK',
      (error: unknown) => (error instanceof ClientError ? Status[error.code] : String(error)),
    );

describe('TLS certificate reload on a real service process', () => {
  it('a Secret volume swap serves the renewed certificate to new connections; an open one keeps working; a mismatched pair is refused', async () => {
    const volume = new ConfigMapVolume(secret('first'));
    volumes.push(volume);
    service = startServiceProcess({ QUOTA_TLS_CERT: volume.path('tls.crt'), QUOTA_TLS_KEY: volume.path('tls.key') });
    const port = await service.port;
    const open = createChannel(`127.0.0.1:${port}`, ChannelCredentials.createSsl(pem('ca.crt')));
    await untilServing(open);
    expect(await servedName(port)).toBe('first');

    volume.update(secret('renewed'));
    const reloaded = await service.logged(/"msg":"TLS certificate reloaded/);
    expect(reloaded).toContain('CN=renewed');
    expect(reloaded).toMatch(/"notAfter":"[A-Z][a-z]{2} /);
    expect(await servedName(port)).toBe('renewed');
    // The connection made before the swap goes on, on its own handshake.
    expect(await healthCode(open)).toBe('OK');

    // A renewed certificate with the old key (a rotation caught half way): refused whole.
    volume.update({ 'tls.crt': text('third.crt'), 'tls.key': text('renewed.key') });
    const rejected = await service.logged(/"msg":"TLS reload rejected/);
    expect(rejected).toContain('"level":40');
    expect(rejected).toMatch(/QUOTA_TLS_KEY: \S+tls\.key is not the private key of the certificate in QUOTA_TLS_CERT/);
    expect(await servedName(port)).toBe('renewed');

    // Then the matching pair: served.
    volume.update(secret('third'));
    await service.logged(/"msg":"TLS certificate reloaded/, 2);
    expect(await servedName(port)).toBe('third');
    expect(await healthCode(open)).toBe('OK');
    open.close();

    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
    const { stdout, stderr } = service.output();
    // No key material in the logs.
    for (const name of ['first', 'renewed', 'third']) {
      const key = text(`${name}.key`).split('\n')[1] as string;
      expect(stdout + stderr).not.toContain(key);
    }
  });

  it('mutual TLS: a new client CA in its own volume admits its clients from then on, and only them', async () => {
    const serving = new ConfigMapVolume(secret('first'));
    const clientCa = new ConfigMapVolume(text('ca.crt'), 'ca.crt');
    volumes.push(serving, clientCa);
    service = startServiceProcess({
      QUOTA_TLS_CERT: serving.path('tls.crt'),
      QUOTA_TLS_KEY: serving.path('tls.key'),
      QUOTA_TLS_CLIENT_CA: clientCa.file,
    });
    const port = await service.port;
    const as = (client: string) => ChannelCredentials.createSsl(pem('ca.crt'), pem(`${client}.key`), pem(`${client}.crt`));
    const health = async (client: string) => {
      const channel = createChannel(`127.0.0.1:${port}`, as(client));
      try {
        return await healthCode(channel);
      } finally {
        channel.close();
      }
    };
    await untilServing(createChannel(`127.0.0.1:${port}`, as('client')));
    expect(await health('client')).toBe('OK');
    expect(await health('next-client')).toBe('UNAVAILABLE');

    clientCa.update(text('next-ca.crt'));
    await service.logged(/"msg":"TLS certificate reloaded/);
    expect(await health('next-client')).toBe('OK');
    expect(await health('client')).toBe('UNAVAILABLE');

    // A CA file with no certificate in it would refuse every client: refused, the loaded CA stays.
    clientCa.update('not a certificate\n');
    expect(await service.logged(/"msg":"TLS reload rejected/)).toMatch(/QUOTA_TLS_CLIENT_CA: \S+ca\.crt holds no PEM certificate/);
    expect(await health('next-client')).toBe('OK');
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });
});

describe('TLS files checked at start', () => {
  it('a key that does not match its certificate, a certificate or key that is no PEM and a CA without a certificate name their variable and path', () => {
    const file = certificates.file;
    expect(() => serverTls({ cert: file('first.crt'), key: file('renewed.key') })).toThrow(
      /QUOTA_TLS_KEY: \S+renewed\.key is not the private key of the certificate in QUOTA_TLS_CERT/,
    );
    expect(() => serverTls({ cert: file('first.key'), key: file('first.key') })).toThrow(/QUOTA_TLS_CERT: \S+first\.key holds no PEM certificate/);
    expect(() => serverTls({ cert: file('first.crt'), key: file('first.crt') })).toThrow(/QUOTA_TLS_KEY: \S+first\.crt is not a usable PEM private key/);
    expect(() => serverTls({ cert: file('first.crt'), key: file('first.key'), clientCa: file('first.key') })).toThrow(
      /QUOTA_TLS_CLIENT_CA: \S+first\.key holds no PEM certificate/,
    );
    expect(serverTls({ cert: file('first.crt'), key: file('first.key'), clientCa: file('ca.crt') }).credentials._isSecure()).toBe(true);
  });
});
