import { afterAll, beforeAll } from 'vitest';
import { type ServiceProcess, startServiceProcess } from '../../support/service-process.js';

/** A real service process (as `make run` starts it) for a test file: started before its tests, stopped after. */
export function useServiceProcess(env: () => Record<string, string>): { address(): string; process(): ServiceProcess } {
  let service: ServiceProcess | undefined;
  let address = '';
  beforeAll(async () => {
    service = startServiceProcess(env());
    address = `127.0.0.1:${await service.port}`;
  }, 60_000);
  afterAll(async () => {
    if (service === undefined) return;
    service.signal('SIGTERM');
    const timer = setTimeout(() => service?.signal('SIGKILL'), 5_000);
    await service.exit;
    clearTimeout(timer);
  }, 30_000);
  return { address: () => address, process: () => service! };
}

/** `count` service processes with the same environment (replicas behind one address in production), started in parallel. */
export function useServiceReplicas(count: number, env: () => Record<string, string>): { addresses(): string[] } {
  let services: ServiceProcess[] = [];
  let addresses: string[] = [];
  beforeAll(async () => {
    services = Array.from({ length: count }, () => startServiceProcess(env()));
    addresses = (await Promise.all(services.map((s) => s.port))).map((port) => `127.0.0.1:${port}`);
  }, 90_000);
  afterAll(async () => {
    for (const service of services) service.signal('SIGTERM');
    const timer = setTimeout(() => {
      for (const service of services) service.signal('SIGKILL');
    }, 5_000);
    await Promise.all(services.map((s) => s.exit));
    clearTimeout(timer);
  }, 30_000);
  return { addresses: () => addresses };
}
