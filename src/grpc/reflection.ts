import type { Server } from 'nice-grpc';
import { ServerReflection, ServerReflectionService } from 'nice-grpc-server-reflection';
import { descriptorSet } from '../gen/descriptor-set.js';

/**
 * The reflection service definition under a protocol version's name. grpcurl
 * before 1.8.9 (still common in distributions) asks only for v1alpha, whose
 * messages are wire-identical to v1, so one implementation serves both.
 */
export function reflectionDefinition(version: 'v1' | 'v1alpha'): typeof ServerReflectionService {
  const path: string = `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`;
  return { serverReflectionInfo: { ...ServerReflectionService.serverReflectionInfo, path } } as typeof ServerReflectionService;
}

/** Server reflection, so grpcurl and similar tools work without the .proto files. */
export function addReflection(server: Server, serviceNames: readonly string[]): void {
  const implementation = ServerReflection(descriptorSet, serviceNames);
  server.add(reflectionDefinition('v1'), implementation);
  server.add(reflectionDefinition('v1alpha'), implementation);
}
