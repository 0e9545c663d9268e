// HTTP mapping of quota decisions, framework-free. The adapters are subpaths:
// '@quota-service/http/express' and '@quota-service/http/fastify'.
export { clientIpResolver } from './client-ip.js';
export { rateLimitHeaders, retryAfterSeconds } from '@quota-service/core';
export { invalidInputBody, type InvalidRequestBody } from './invalid-input.js';
export { rateLimitCheck, toOutcome, type RateLimitCheckOptions, type RateLimitErrorBody, type RateLimitOutcome } from './rate-limit-check.js';
