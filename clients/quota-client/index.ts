// The quota client: see clients/README.md.
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
  QuotaClientOptions,
  QuotaDecision,
  QuotaLimitStatus,
} from './types.js';
