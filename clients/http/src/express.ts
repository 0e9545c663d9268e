import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { rateLimitCheck, type RateLimitCheckOptions } from './rate-limit-check.js';

/**
 * Express middleware: runs the check before the route handler. Denied: 429
 * (or 503 when the limiter is unavailable under fail_closed) with the JSON
 * body and headers; input the quota service refuses: 400 invalid_request;
 * allowed: the RateLimit headers, then next().
 */
export function expressRateLimit<Req extends Request = Request>(options: RateLimitCheckOptions<Req>): RequestHandler {
  const check = rateLimitCheck(options);
  return (request: Request, response: Response, next: NextFunction) => {
    // Req only adds what the app's own middleware set on the request (e.g. its principal).
    check(request as Req).then((outcome) => {
      response.set(outcome.headers);
      if (outcome.action === 'continue') next();
      else response.status(outcome.status).json(outcome.body);
    }, next);
  };
}
