import type { Limit, Policy, PolicySet } from './types.js';
import { InvalidArgumentError, NoConcurrencyLimitError, PolicyNotFoundError } from './errors.js';
import { KEY_SEGMENT_PATTERN } from './keys.js';

export interface AllowInput {
  policy: string;
  identity: Readonly<Record<string, string>>;
  /** 0 means 1. */
  cost: number;
  requestId: string;
}

/** A request that passed validation: every limit has its identity value, the cost is grantable. */
export interface ValidRequest {
  policy: Policy;
  /**
   * The policy's limits with the parameters of the identity's plan where one
   * applies (a limit's `plans`); the policy's own array when none does.
   */
  limits: readonly Limit[];
  cost: number;
  identityValues: readonly string[];
  /** '' when the caller sent none. */
  requestId: string;
}

/** Policy names and identity part names follow the policy file's rule for names: at most this long. */
export const MAX_NAME_CHARS = 64;

/**
 * The smallest cost a request may spend, other than 0 (which means 1): a
 * smaller one would change no balance (5e-324 subtracted from 10 is 10) and
 * so spend nothing while being allowed.
 */
export const MIN_COST = 0.000001;

/** Identity values and request ids are key material and log fields: bounded and printable. */
export const MAX_ID_BYTES = 256;

/**
 * The problem with a string that is not well-formed Unicode. From the wire, that is
 * one the server decoded from bytes that are not valid UTF-8 (src/grpc/strict-utf8.ts);
 * in a process, a string with a lone surrogate, which UTF-8 cannot encode.
 */
const NOT_UTF8 = 'not valid UTF-8';

/**
 * General category Cc is exactly U+0000-U+001F and U+007F-U+009F, all in the
 * BMP, so this plain class is the same test as /\p{Cc}/u without a Unicode-mode
 * regex on every identity value of every request.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this pattern finds.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Checks a request against its policy before anything touches the store, so
 * that bad input is rejected with the field named and no key is written.
 */
export function validateRequest(policies: PolicySet, input: AllowInput): ValidRequest {
  const request = validateRequestShape(policies, input);
  for (const limit of request.limits) checkCost(request.policy, limit, request.cost);
  return request;
}

/**
 * validateRequest without the check that each limit can grant the cost: for
 * a caller that applies other parameters first (the service's runtime
 * overrides) and checks the cost against those (checkCost).
 */
export function validateRequestShape(policies: PolicySet, input: AllowInput): ValidRequest {
  const policy = findPolicy(policies, input.policy);

  if (!Number.isFinite(input.cost)) throw new InvalidArgumentError('cost', `must be a finite number, got ${input.cost}`);
  if (input.cost < 0) throw new InvalidArgumentError('cost', `must not be negative, got ${input.cost}`);
  if (input.cost > 0 && input.cost < MIN_COST) throw new InvalidArgumentError('cost', `must be 0 (one unit) or at least ${MIN_COST}, got ${input.cost}`);
  const cost = input.cost === 0 ? 1 : input.cost;

  if (input.requestId !== '') checkId('request_id', input.requestId);
  else checkLeaseHasId(policy);

  checkIdentity(input.identity);
  const limits = withPlans(policy.limits, input.identity);
  const identityValues: string[] = new Array(limits.length);
  for (let i = 0; i < limits.length; i++) identityValues[i] = identityValue(policy, limits[i]!, input.identity);
  return { policy, limits, cost, identityValues, requestId: input.requestId };
}

/** A policy with a concurrency limit acquires a lease per request id: an Allow without one has no lease to hold. */
function checkLeaseHasId(policy: Policy): void {
  for (const limit of policy.limits) {
    if (limit.algorithm.lease !== undefined) {
      throw new InvalidArgumentError(
        'request_id',
        `required by limit "${limit.name}" of policy "${policy.name}": a concurrency limit holds one lease per request_id, which Release and Renew name`,
      );
    }
  }
}

/** A cost the limit (under the parameters that apply) could never grant is bad input, not a denial. */
export function checkCost(policy: Policy, limit: Limit, cost: number): void {
  const costProblem = limit.algorithm.rejectCost(limit.params, cost);
  if (costProblem !== undefined) {
    throw new InvalidArgumentError('cost', `${costProblem} (limit "${limit.name}" of policy "${policy.name}")`);
  }
}

/**
 * Each limit as the identity's plan sets it: the plan named by the value of
 * its `plan_by` part, else the limit itself (no such part, or a value that
 * names no plan). The same array when no limit has plans: no copy per request.
 */
export function withPlans(limits: readonly Limit[], identity: Readonly<Record<string, string>>): readonly Limit[] {
  let out: Limit[] | undefined;
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i]!;
    if (limit.plans === undefined) continue;
    const value = Object.hasOwn(identity, limit.planBy!) ? identity[limit.planBy!] : undefined;
    const planned = value === undefined ? undefined : limit.plans.get(value);
    if (planned === undefined) continue;
    out ??= limits.slice();
    out[i] = planned;
  }
  return out ?? limits;
}

export interface PeekInput {
  policy: string;
  identity: Readonly<Record<string, string>>;
}

/** GetQuota's input: the policy and identity checks of Allow, without a cost. */
export function validatePeek(policies: PolicySet, input: PeekInput): ValidRequest {
  const policy = findPolicy(policies, input.policy);
  checkIdentity(input.identity);
  const limits = withPlans(policy.limits, input.identity);
  return { policy, limits, cost: 0, identityValues: limits.map((limit) => identityValue(policy, limit, input.identity)), requestId: '' };
}

export interface LeaseInput {
  policy: string;
  identity: Readonly<Record<string, string>>;
  /** The request id of the Allow that acquired the lease. */
  requestId: string;
}

/**
 * Release's and Renew's input: Allow's policy and identity checks, a request
 * id required, and a policy with a concurrency limit (else FAILED_PRECONDITION:
 * it holds no leases).
 */
export function validateLease(policies: PolicySet, input: LeaseInput): ValidRequest {
  const request = validatePeek(policies, input);
  checkId('request_id', input.requestId);
  if (!request.policy.limits.some((limit) => limit.algorithm.lease !== undefined)) throw new NoConcurrencyLimitError(request.policy.name);
  return { ...request, requestId: input.requestId };
}

function findPolicy(policies: PolicySet, name: string): Policy {
  if (name === '') throw new InvalidArgumentError('policy', 'must not be empty');
  // Checked before the name is looked up or echoed: an error message carries at most this much of it.
  if (name.length > MAX_NAME_CHARS) {
    throw new InvalidArgumentError('policy', name.isWellFormed() ? `must be at most ${MAX_NAME_CHARS} characters, got ${name.length}` : NOT_UTF8);
  }
  const policy = policies.get(name);
  // Policy names are ASCII (the policy file's rule), so a name that is not well-formed is never
  // found: it is checked only then, at no cost to a request naming a policy that exists.
  if (policy === undefined) throw name.isWellFormed() ? new PolicyNotFoundError(name) : new InvalidArgumentError('policy', NOT_UTF8);
  return policy;
}

function identityValue(policy: Policy, limit: Limit, identity: Readonly<Record<string, string>>): string {
  const value = Object.hasOwn(identity, limit.keyBy) ? identity[limit.keyBy] : undefined;
  if (value === undefined) {
    throw new InvalidArgumentError(`identity.${limit.keyBy}`, `required by limit "${limit.name}" of policy "${policy.name}"`);
  }
  return value;
}

/**
 * Every identity part, used by a limit or not: its name follows the rule for
 * names (so an error may print it), its value the rule for ids. A part no
 * limit uses is still key material for the next policy and a log field.
 */
function checkIdentity(identity: Readonly<Record<string, string>>): void {
  for (const name of Object.keys(identity)) {
    if (!KEY_SEGMENT_PATTERN.test(name)) {
      if (!name.isWellFormed()) throw new InvalidArgumentError('identity', `a part name is ${NOT_UTF8}`);
      throw new InvalidArgumentError(
        'identity',
        `a part name must be 1-${MAX_NAME_CHARS} lowercase letters, digits, "_", "." or "-", starting with a letter or digit (got ${name.length} characters)`,
      );
    }
    // The field name is built only for an error: a valid request (the usual case) never needs it.
    const problem = idProblem(identity[name]!);
    if (problem !== undefined) throw new InvalidArgumentError(`identity.${name}`, problem);
  }
}

/**
 * A UTF-16 code unit is at most 3 UTF-8 bytes (a surrogate pair, two units,
 * is 4), so a string this short is within MAX_ID_BYTES without counting.
 */
const SHORT_ENOUGH = Math.floor(MAX_ID_BYTES / 3);

/** An identity value or request id: non-empty, well-formed, printable, at most MAX_ID_BYTES; InvalidArgumentError naming `field` otherwise. */
export function checkId(field: string, value: string): void {
  const problem = idProblem(value);
  if (problem !== undefined) throw new InvalidArgumentError(field, problem);
}

function idProblem(value: string): string | undefined {
  if (value === '') return 'must not be empty';
  if (!value.isWellFormed()) return NOT_UTF8;
  if (CONTROL_CHARACTER.test(value)) return 'must not contain control characters';
  if (value.length <= SHORT_ENOUGH) return undefined;
  const bytes = Buffer.byteLength(value, 'utf8');
  return bytes > MAX_ID_BYTES ? `must be at most ${MAX_ID_BYTES} bytes, got ${bytes}` : undefined;
}
