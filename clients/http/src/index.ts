// HTTP mapping of quota decisions, framework-free. The adapters are subpaths:
// '@quota-service/http/express' and '@quota-service/http/fastify'.
export { clientIpResolver } from './client-ip.js';
export { rateLimitHeaders, retryAfterSeconds } from '@quota-service/core';
export { invalidInputBody, type InvalidRequestBody } from './invalid-input.js';
export { legacyRateLimitHeaders } from './legacy-headers.js';
export {
  rateLimitCheck,
  toOutcome,
  type DenialBody,
  type DenialMessage,
  type RateLimitCheckOptions,
  type RateLimitDenial,
  type RateLimitErrorBody,
  type RateLimitInvalidInput,
  type RateLimitOutcome,
  type RateLimitPass,
} from './rate-limit-check.js';
export { settleAfterResponse, type RefundOptions, type RefundResult } from './refund.js';
