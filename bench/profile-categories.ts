/** What a CPU profile's sample ran, in the groups bench/cpu-breakdown.ts reports. */
export const CATEGORIES = ['gRPC + HTTP/2', 'protobuf', 'Redis I/O', 'client', 'service code', 'node other', 'native', 'GC'] as const;
export type Category = (typeof CATEGORIES)[number] | 'idle';

const SOURCE_DIRS: Array<[RegExp, Category]> = [
  [/\/clients\/(quota-client|core)\//, 'client'],
  [/\/clients\/contract\//, 'protobuf'],
  [/\/src\/(api|engine|grpc|store|metrics|overrides|config)\//, 'service code'],
];

/** The group of one profile node, from its function name and script URL. */
export function categoryOf(functionName: string, url: string): Category {
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(garbage collector)') return 'GC';
  // V8's "(program)": native code outside JavaScript (the event loop, syscalls, the profiler itself).
  if (functionName === '(program)') return 'native';
  if (url.includes('/@grpc/') || url.includes('/nice-grpc') || url.includes('/abort-controller-x/') || url.startsWith('node:internal/http2')) {
    return 'gRPC + HTTP/2';
  }
  if (url.includes('/protobufjs/') || url.includes('/@bufbuild/') || url.includes('/google-protobuf/') || url.includes('/@protobufjs/')) return 'protobuf';
  if (url.includes('/ioredis/') || url.includes('/redis-parser/') || functionName === 'writeUtf8String' || functionName === 'writeBuffer') return 'Redis I/O';
  for (const [dir, category] of SOURCE_DIRS) if (dir.test(url)) return category;
  return 'node other';
}
