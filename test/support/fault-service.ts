import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClientError, createChannel, createClient, Status, type Channel } from 'nice-grpc';
import { DecisionSource, QuotaServiceDefinition, type AllowResponse, type QuotaServiceClient } from '@quota-service/contract';
import { parsePolicies, type PolicySet } from '@quota-service/core';
import type { Answer } from './fault-figures.js';
import type { NetworkNamespace } from './netns.js';
import type { PacedCall } from './paced-load.js';
import { startServiceProcess, untilServing, type ServiceProcess } from './service-process.js';

/**
 * The policies of the fault scenarios: one per failure mode, each a token
 * bucket whose refill adds less than a unit in an hour, so a reference model
 * can replay a run without knowing Redis's clock (fault-figures.ts).
 */
export function faultPolicies(capacity: number): { text: string; set: PolicySet; byMode: Record<'fail_open' | 'fail_closed' | 'local', string> } {
  const text = `
policies:
  fo:
    failure_mode: fail_open
    limits: [{ name: fo, key_by: user, algorithm: token_bucket, capacity: ${capacity}, refill_per_second: 0.0001 }]
  fc:
    failure_mode: fail_closed
    limits: [{ name: fc, key_by: user, algorithm: token_bucket, capacity: ${capacity}, refill_per_second: 0.0001 }]
  lo:
    failure_mode: local
    local_share: 0.5
    limits: [{ name: lo, key_by: user, algorithm: token_bucket, capacity: ${capacity}, refill_per_second: 0.0001 }]
`;
  return { text, set: parsePolicies(text), byMode: { fail_open: 'fo', fail_closed: 'fc', local: 'lo' } };
}

/** A service process (test/support/service-process.ts) on a given policy text, with a client for it. */
export interface FaultService {
  readonly process: ServiceProcess;
  readonly channel: Channel;
  readonly client: QuotaServiceClient;
  /** SIGTERM, wait for the exit; returns its code. */
  stop(): Promise<number | null>;
}

export interface FaultServiceOptions {
  readonly policies: string;
  readonly env: Record<string, string>;
  /** Run the service inside this namespace, reached over its link. */
  readonly netns?: NetworkNamespace;
}

export async function startFaultService(options: FaultServiceOptions): Promise<FaultService> {
  const dir = mkdtempSync(join(tmpdir(), 'quota-faults-'));
  const file = join(dir, 'policies.yaml');
  writeFileSync(file, options.policies);
  const host = options.netns?.address ?? '127.0.0.1';
  const process = startServiceProcess(
    { QUOTA_POLICIES: file, QUOTA_GRPC_ADDR: `${host}:0`, ...options.env },
    options.netns === undefined ? {} : { netns: options.netns },
  );
  const channel = createChannel(`${host}:${await process.port}`);
  await untilServing(channel, 'quota.v1.QuotaService');
  return {
    process,
    channel,
    client: createClient(QuotaServiceDefinition, channel),
    async stop() {
      channel.close();
      process.signal('SIGTERM');
      const code = await process.exit;
      rmSync(dir, { recursive: true, force: true });
      return code;
    },
  };
}

const SOURCE_NAMES: Record<number, string> = {
  [DecisionSource.DECISION_SOURCE_STORE]: 'store',
  [DecisionSource.DECISION_SOURCE_FAIL_OPEN]: 'fail_open',
  [DecisionSource.DECISION_SOURCE_FAIL_CLOSED]: 'fail_closed',
  [DecisionSource.DECISION_SOURCE_LOCAL]: 'local',
};

/** A paced call to the service as an Answer. */
export function answerOf(call: PacedCall<AllowResponse>): Answer {
  const base = { policy: call.policy, user: call.user, startedAt: call.startedAt, endedAt: call.endedAt };
  if (call.response === undefined) {
    const error = call.error instanceof ClientError ? `${Status[call.error.code]}: ${call.error.details}` : String(call.error);
    return { ...base, source: 'error', allowed: false, error };
  }
  const source = SOURCE_NAMES[call.response.source] ?? `unknown ${call.response.source}`;
  const remaining = source === 'store' ? call.response.limits[0]?.remaining : undefined;
  return { ...base, source, allowed: call.response.allowed, ...(remaining === undefined ? {} : { remaining: Number(remaining) }) };
}

/** Lines the service logged at error level or above, and anything it wrote to stderr. */
export function serviceTrouble(service: ServiceProcess): string[] {
  const { stdout, stderr } = service.output();
  const errors = stdout.split('\n').filter((line) => /"level":(5\d|60)/.test(line));
  return stderr.trim() === '' ? errors : [...errors, `stderr: ${stderr.trim()}`];
}
