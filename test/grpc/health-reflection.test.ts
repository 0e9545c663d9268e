import { createClient } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/store/memory.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { listedServices, reflect } from '../support/reflection.js';

const { FileDescriptorProto } = await import('google-protobuf/google/protobuf/descriptor_pb.js');

let service: TestService;
beforeAll(async () => {
  service = await startTestService(new MemoryStore());
});
afterAll(async () => {
  await service?.stop();
});

describe('standard gRPC services (what grpcurl uses)', () => {
  it('grpc.health.v1 reports SERVING for the server and for quota.v1.QuotaService', async () => {
    const health = createClient(HealthDefinition, service.channel);
    expect((await health.check({ service: '' })).status).toBe(1);
    expect((await health.check({ service: 'quota.v1.QuotaService' })).status).toBe(1);
  });

  it.each(['v1', 'v1alpha'] as const)('server reflection %s lists the services (grpcurl list)', async (version) => {
    const names = await listedServices(service.channel, version);
    expect(names).toEqual(expect.arrayContaining(['quota.v1.QuotaService', 'grpc.health.v1.Health']));
  });

  it('server reflection describes quota.v1.QuotaService (grpcurl describe)', async () => {
    const response = await reflect(service.channel, (r) => r.setFileContainingSymbol('quota.v1.QuotaService'));
    const files = response.getFileDescriptorResponse()!.getFileDescriptorProtoList_asU8();
    expect(files).toHaveLength(1);
    const file = FileDescriptorProto.deserializeBinary(files[0]!);
    expect(file.getName()).toBe('quota/v1/quota.proto');
    const methods = file
      .getServiceList()[0]
      ?.getMethodList()
      .map((m) => m.getName());
    expect(methods).toEqual(['Allow', 'ListPolicies', 'GetQuota', 'AllowBatch', 'AllowStream', 'Settle', 'Release', 'Renew', 'TakeSlice']);
  });
});
