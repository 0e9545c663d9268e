import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChannelCredentials } from '@grpc/grpc-js';
import { createChannel, type Channel } from 'nice-grpc';
import type { ServiceProcess } from './service-process.js';

/** A policy file with policy `shared`: a bucket of 10 per user that refills about once a day, so counts are exact whatever a test's pace. */
export function sharedBucketPolicies(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'quota-workers-')), 'policies.yaml');
  writeFileSync(
    file,
    'policies:\n  shared:\n    limits:\n      - name: shared\n        key_by: user\n        algorithm: token_bucket\n        capacity: 10\n        refill_per_second: 0.00001\n',
  );
  return file;
}

/**
 * A channel on a connection of its own (grpc-js would otherwise share one between channels
 * to the same address): the primary hands each new connection to the worker serving the fewest. Kept in
 * `opened`, for the test to close.
 */
export function ownConnection(port: number, opened: Channel[], credentials?: ChannelCredentials): Channel {
  const channel = createChannel(`127.0.0.1:${port}`, credentials, { 'grpc.use_local_subchannel_pool': 1 });
  opened.push(channel);
  return channel;
}

/** The pids of the two workers of a QUOTA_WORKERS=2 service, once both are SERVING. */
export async function twoReadyWorkers(service: ServiceProcess): Promise<number[]> {
  await service.logged(/"msg":"store ready: health SERVING"/, 2);
  const line = await service.logged(/"msg":"all workers listening"/);
  return JSON.parse(line).workers as number[];
}

/** The pid of the worker that logged `call started` for `requestId` (the service logs at debug). */
export async function answeredBy(service: ServiceProcess, requestId: string): Promise<number> {
  return JSON.parse(await service.logged(new RegExp(`"requestId":"${requestId}".*"msg":"call started"`))).pid as number;
}
