// The quota client for the quota decision service (README.md beside this package).
export { createQuotaClient, DEFAULT_BATCH, DEFAULT_DEADLINE_MS } from './quota-client.js';
export { QuotaInvalidArgumentError, QuotaPolicyNotFoundError, QuotaRequestError } from './errors.js';
export type {
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
