// The quota client for the quota decision service (README.md beside this package).
export { createQuotaClient, DEFAULT_BATCH, DEFAULT_DEADLINE_MS, toDecision } from './quota-client.js';
export {
  LeaseLostError,
  QuotaInvalidArgumentError,
  QuotaPolicyNotFoundError,
  QuotaRequestError,
  QuotaReservationNotFoundError,
  type LeaseLossReason,
} from './errors.js';
export type {
  AcquireOptions,
  AcquireParams,
  Lease,
  LeaseOnUnavailable,
  LeaseRelease,
  LeaseTimers,
  Reservation,
  ReserveParams,
  Settlement,
  SettlementStatus,
  AllowOptions,
  AllowParams,
  BatchOptions,
  DecisionSource,
  LocalLimitOptions,
  OnUnavailable,
  QuotaClient,
  QuotaClientLogger,
  QuotaClientOptions,
  QuotaDecision,
  QuotaLimitStatus,
} from './types.js';
