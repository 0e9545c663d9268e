import type { ServiceDefinition } from '@grpc/grpc-js';

const same = (bytes: Buffer) => bytes;

/** bench/hop-floor.ts's echo rpcs: raw bytes in and out, no protobuf, so both carry exactly the same payload. */
export const ECHO_SERVICE = {
  unary: {
    path: '/bench.Echo/Unary',
    requestStream: false,
    responseStream: false,
    requestSerialize: same,
    requestDeserialize: same,
    responseSerialize: same,
    responseDeserialize: same,
  },
  stream: {
    path: '/bench.Echo/Stream',
    requestStream: true,
    responseStream: true,
    requestSerialize: same,
    requestDeserialize: same,
    responseSerialize: same,
    responseDeserialize: same,
  },
} satisfies ServiceDefinition;
