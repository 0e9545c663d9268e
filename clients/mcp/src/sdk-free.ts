/** Everything of the guard that neither SDK line binds: both entries export it. */
export type { ToolGuardOptions } from './control-chain.js';
export type { ToolPolicy, FailureMode } from './tool-policy.js';
export type { ToolResult } from './tool-result.js';
export { principalFromAuthInfo, quotaIdentity, type Principal, type VerifiedCredential } from './principal.js';
export type { Approver, ApprovalRequest } from './approval.js';
export {
  APPROVAL_META_KEY,
  ApprovalTokens,
  argumentsDigest,
  type ApprovalParty,
  type ApprovalRefusal,
  type ApprovalRequestDetails,
  type ApprovalTokenProblem,
} from './approval-token.js';
export {
  JsonLinesAuditSink,
  redactArgumentValues,
  StderrAuditSink,
  writeAuditRecord,
  type AuditRecord,
  type AuditSink,
  type ConcurrencyOutcome,
} from './audit.js';
export { REFUSAL_META_KEY, refusalResult, retryAfterSeconds, type Refusal, type RefusalReason } from './refusals.js';
export type {
  QuotaDecider,
  QuotaDecision,
  AllowParams,
  DecisionSource,
  QuotaLimitStatus,
  GuardQuota,
  QuotaReserver,
  QuotaLeaser,
  Reservation,
  Settlement,
  SettlementStatus,
  Lease,
  LeaseRelease,
} from './quota-decider.js';
