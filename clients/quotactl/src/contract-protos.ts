import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { CompatServiceDefinition } from 'nice-grpc';
import { CliError, EXIT } from './exit-codes.js';

/**
 * The directory of .proto files @quota-service/contract ships (its README:
 * `proto/`): Envoy's rate limit service with its imports, the health service,
 * and quota.v1. Any gRPC client can load them from there.
 */
export function contractProtoDir(): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('@quota-service/contract/package.json')), 'proto');
}

/**
 * A service's client definition, loaded from the contract's `file`: for
 * the APIs quotactl calls without generated code (health, Envoy's). Loaded
 * when a command needs it, never at start.
 */
export async function protoService(file: string, service: string): Promise<CompatServiceDefinition> {
  const dir = contractProtoDir();
  if (!existsSync(join(dir, file))) {
    throw new CliError(`cannot find ${file} in ${dir}: install the @quota-service/contract that came with this quotactl`, EXIT.failed);
  }
  const { loadSync } = await import('@grpc/proto-loader');
  // Field names as in the proto; enums as their names; 64-bit numbers as numbers (durations, counts).
  const definition = loadSync(file, { includeDirs: [dir], keepCase: true, longs: Number, enums: String, defaults: true });
  return definition[service] as unknown as CompatServiceDefinition;
}
