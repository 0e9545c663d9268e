import { createClient } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reflectionDefinition } from '../../src/grpc/reflection.js';
import { MemoryStore } from '../../src/store/memory.js';
import { startTestService, type TestService } from '../support/quota-service.js';

// The reflection client speaks the google-protobuf classes that nice-grpc-server-reflection ships.
const { ServerReflectionRequest } = await import('nice-grpc-server-reflection/lib/proto/grpc/reflection/v1/reflection_pb.js');
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

  async function reflect(configure: (request: InstanceType<typeof ServerReflectionRequest>) => void, version: 'v1' | 'v1alpha' = 'v1') {
    const reflection = createClient(reflectionDefinition(version), service.channel);
    const request = new ServerReflectionRequest();
    configure(request);
    async function* one() {
      yield request;
    }
    for await (const response of reflection.serverReflectionInfo(one())) return response;
    throw new Error('no reflection response');
  }

  it.each(['v1', 'v1alpha'] as const)('server reflection %s lists the services (grpcurl list)', async (version) => {
    const response = await reflect((r) => r.setListServices('*'), version);
    const names = response
      .getListServicesResponse()!
      .getServiceList()
      .map((s: { getName(): string }) => s.getName());
    expect(names).toEqual(expect.arrayContaining(['quota.v1.QuotaService', 'grpc.health.v1.Health']));
  });

  it('server reflection describes quota.v1.QuotaService (grpcurl describe)', async () => {
    const response = await reflect((r) => r.setFileContainingSymbol('quota.v1.QuotaService'));
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
