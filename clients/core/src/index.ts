// The I/O-free core the quota service and its clients share: the domain types,
// the algorithm models, the policy file's schema and parser, key and request
// validation rules, and an in-process limiter. Importing it reads no file and
// starts nothing.
export * from './types.js';
export * from './errors.js';
export * from './clock.js';
export * from './keys.js';
export * from './validate-request.js';
export * from './validate-settle.js';
export * from './decision.js';
export * from './remembered-decision.js';
export * from './decide-in-memory.js';
export * from './replayed-leases.js';
export * from './rate-limit-headers.js';
export { PACING, type Pacing, SendPacer } from './send-pacer.js';
export * from './local-limiter.js';
export { cappedName, identityDigests, valueDigest } from './value-digest.js';
export { type Window, windowMs } from './algorithms/fixed-window/model.js';
export {
  formatWindow,
  MAX_WINDOW_MS,
  parseWindowLength,
  UNIT_MS,
  UNITS,
  type UnitName,
  WINDOW_LENGTH_MESSAGE,
  windowLength,
  windowOfLength,
} from './window-length.js';
export { MemorySpace } from './algorithms/memory-space.js';
export { outcomeOf, outcomeOfFields } from './algorithms/outcome.js';
export { algorithms, type AlgorithmName } from './algorithms/registry.js';
export type { LeaseOp, LeaseOps } from './algorithms/algorithm.js';
export { bucketCapacity, CONCURRENCY_MAX_LIMIT, LEASE_TTL_MAX_MS, LEASE_TTL_MIN_MS, MIN_CAPACITY } from './policies/limit-parameters.js';
export type { ConcurrencyParams } from './algorithms/concurrency/model.js';
export { parsePolicies, PolicyFileError, toParams } from './policies/parse-policies.js';
export { PARAMETER_CHECKS, parameterFields, parameterSchema, sameWindow, type AlgorithmFileName } from './policies/limit-parameters.js';
export {
  FAILURE_MODES,
  limitSchema,
  policyFileSchema,
  SLIDING_COUNTER_MAX_LIMIT,
  SLIDING_LOG_MAX_LIMIT,
  type FailureModeName,
  type LimitDefinition,
  type PolicyFile,
  WINDOW_IS_THE_LIMITS,
} from './policies/policy-schema.js';
export * from './reservations-and-leases.js';
export {
  SLICE_ALGORITHMS,
  SLICE_TTL_MAX_MS,
  type SliceOptions,
  type SlicesDefinition,
  slicesRefusal,
  slicesSchema,
  slicesSupported,
  toSliceOptions,
} from './policies/slice-options.js';
export {
  DEFAULT_SLICE_THRESHOLD,
  type SliceCounters,
  SliceHolder,
  type SliceHolderOptions,
  type SliceSource,
  type SliceTimers,
} from './slices/slice-holder.js';
export { type SliceAnswer, type SliceOp, type SliceRecord, sliceInMemory, sliceKeyOf, sliceRecordTtlMs } from './slices/slice-model.js';
export { parseYaml, YAML_LIMITS, YamlLimitError, YamlTextError, yamlValue } from './yaml-text.js';
