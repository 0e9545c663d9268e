// The callers file (QUOTA_AUTH_TOKENS) reloads like the policy file: a Secret
// volume update rotates tokens without a restart, an invalid file keeps the
// loaded callers, and no log line carries a token.
import { ClientError, createChannel, createClient, Metadata, Status } from 'nice-grpc';
import { afterAll, describe, expect, it } from 'vitest';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { ConfigMapVolume } from '../support/configmap-volume.js';
import { startServiceProcess, untilServing, type ServiceProcess } from '../support/service-process.js';

const OLD_TOKEN = 'old-token-0123456789abcdef';
const NEW_TOKEN = 'new-token-fedcba9876543210';
const callersFile = (token: string) => `callers:\n  order-api:\n    token: ${token}\n    policies: [orders]\n`;

let service: ServiceProcess | undefined;
const volume = new ConfigMapVolume(callersFile(OLD_TOKEN), 'callers.yaml');
afterAll(() => {
  service?.signal('SIGKILL');
  volume.remove();
});

describe('callers hot reload on a real service process', () => {
  it('a Secret volume swap rotates the token; an invalid file is rejected and the loaded callers stay', async () => {
    service = startServiceProcess({ QUOTA_AUTH_TOKENS: volume.file });
    const channel = createChannel(`127.0.0.1:${await service.port}`);
    await untilServing(channel);
    const client = createClient(QuotaServiceDefinition, channel);
    const codeWith = (token: string) =>
      client.listPolicies({}, { metadata: Metadata({ authorization: `Bearer ${token}` }) }).then(
        () => 'OK',
        (error: unknown) => (error instanceof ClientError ? Status[error.code] : String(error)),
      );
    expect(await codeWith(OLD_TOKEN)).toBe('OK');
    expect(await codeWith(NEW_TOKEN)).toBe('UNAUTHENTICATED');

    volume.update(callersFile(NEW_TOKEN));
    expect(await service.logged(/"msg":"callers reloaded"/)).toContain('"callers":1');
    expect(await codeWith(NEW_TOKEN)).toBe('OK');
    expect(await codeWith(OLD_TOKEN)).toBe('UNAUTHENTICATED');

    // Too short a token: refused whole, the new token keeps working.
    volume.update(callersFile('tooShortTok1'));
    const rejected = await service.logged(/"msg":"callers reload rejected/);
    expect(rejected).toContain('the 1st caller (line 2, name sha256 45286570): token: must be at least 16 characters');
    expect(rejected).toContain('"level":40');
    expect(await codeWith(NEW_TOKEN)).toBe('OK');

    channel.close();
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
    const { stdout, stderr } = service.output();
    for (const token of [OLD_TOKEN, NEW_TOKEN, 'tooShortTok1']) {
      expect(stdout + stderr).not.toContain(token);
    }
  });
});
