import { type Channel, createClient } from 'nice-grpc';
import { reflectionDefinition } from '../../src/grpc/reflection.js';

// The reflection client speaks the google-protobuf classes that nice-grpc-server-reflection ships.
const { ServerReflectionRequest } = await import('nice-grpc-server-reflection/lib/proto/grpc/reflection/v1/reflection_pb.js');
type ReflectionRequest = InstanceType<typeof ServerReflectionRequest>;

/** One server reflection request on `channel`, as grpcurl sends it, and its one response. */
export async function reflect(channel: Channel, configure: (request: ReflectionRequest) => void, version: 'v1' | 'v1alpha' = 'v1') {
  const request = new ServerReflectionRequest();
  configure(request);
  async function* one() {
    yield request;
  }
  for await (const response of createClient(reflectionDefinition(version), channel).serverReflectionInfo(one())) return response;
  throw new Error('no reflection response');
}

/** The services the server lists through reflection (grpcurl list). */
export async function listedServices(channel: Channel, version: 'v1' | 'v1alpha' = 'v1'): Promise<string[]> {
  const response = await reflect(channel, (request) => request.setListServices('*'), version);
  return response
    .getListServicesResponse()!
    .getServiceList()
    .map((service: { getName(): string }) => service.getName());
}
