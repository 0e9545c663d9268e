import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import type { Server } from 'nice-grpc';
import { ServerReflection, ServerReflectionService } from 'nice-grpc-server-reflection';
import { descriptorSet } from '../gen/descriptor-set.js';
import { envoyDescriptorSet } from '../gen/envoy-descriptor-set.js';

/**
 * The reflection service definition under a protocol version's name. grpcurl
 * before 1.8.9 (still common in distributions) asks only for v1alpha, whose
 * messages are wire-identical to v1, so one implementation serves both.
 */
export function reflectionDefinition(version: 'v1' | 'v1alpha'): typeof ServerReflectionService {
  const path: string = `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`;
  return { serverReflectionInfo: { ...ServerReflectionService.serverReflectionInfo, path } } as typeof ServerReflectionService;
}

/**
 * The files of proto/ and of Envoy's rate limit service in one set: each
 * file once (both hold the google/protobuf files they import, the same
 * files built by the same buf).
 */
export function servedDescriptorSet(): Buffer {
  const ours = fromBinary(FileDescriptorSetSchema, descriptorSet);
  const names = new Set(ours.file.map((file) => file.name));
  for (const file of fromBinary(FileDescriptorSetSchema, envoyDescriptorSet).file) if (!names.has(file.name)) ours.file.push(file);
  return Buffer.from(toBinary(FileDescriptorSetSchema, ours));
}

/** Server reflection, so grpcurl and similar tools work without the .proto files. */
export function addReflection(server: Server, serviceNames: readonly string[]): void {
  const implementation = ServerReflection(servedDescriptorSet(), serviceNames);
  server.add(reflectionDefinition('v1'), implementation);
  server.add(reflectionDefinition('v1alpha'), implementation);
}
