// The guard depends on one method of a quota client: a decision per call.
export type { AllowParams, Decision as QuotaDecision, DecisionSource, LimitStatus as QuotaLimitStatus, QuotaDecider } from '@quota-service/core';
