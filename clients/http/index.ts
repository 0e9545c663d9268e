// HTTP mapping of quota decisions: see clients/README.md.
export { clientIpResolver } from './client-ip.js';
export { expressRateLimit } from './express.js';
export { fastifyRateLimit } from './fastify.js';
export { rateLimitHeaders, retryAfterSeconds } from './headers.js';
export { rateLimitCheck, toOutcome, type RateLimitCheckOptions, type RateLimitErrorBody, type RateLimitOutcome } from './rate-limit-check.js';
