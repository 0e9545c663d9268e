// TEMPORARY: a copy of the public shape of clients/quota-client (issue 6), fixed in the
// coordination contract. Replace this file's body with
//   export type { AllowParams, QuotaDecision, QuotaLimitStatus, DecisionSource } from '../quota-client/index.js';
//   export type QuotaDecider = Pick<QuotaClient, 'allow'>;
// once clients/quota-client has landed. Nothing else in clients/mcp needs to change.

export interface AllowParams {
  policy: string;
  identity: Record<string, string>;
  cost?: number;
  requestId?: string;
}

export interface QuotaLimitStatus {
  name: string;
  algorithm: string;
  limit: number;
  remaining: number;
  resetAfterMs: number;
}

/** Where a decision came from: 'store' = the service decided; the others = it could not be asked. */
export type DecisionSource = 'store' | 'fail_open' | 'fail_closed' | 'local';

export interface QuotaDecision {
  allowed: boolean;
  retryAfterMs: number;
  deniedBy: string;
  limits: QuotaLimitStatus[];
  /** 0 unless a shaping limit asks the caller to wait. */
  delayMs: number;
  source: DecisionSource;
}

interface QuotaClient {
  allow(params: AllowParams): Promise<QuotaDecision>;
  close(): Promise<void>;
}

/** All the guard needs from a quota client: one decision per call. */
export type QuotaDecider = Pick<QuotaClient, 'allow'>;
