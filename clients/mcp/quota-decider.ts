// The guard depends on one method of the quota client: a decision per call.
import type { QuotaClient } from '../quota-client/index.js';

export type { AllowParams, DecisionSource, QuotaDecision, QuotaLimitStatus } from '../quota-client/index.js';

/** All the guard needs from a quota client: one decision per call. */
export type QuotaDecider = Pick<QuotaClient, 'allow'>;
