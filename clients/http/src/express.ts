import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { type RateLimitCheckOptions, type RateLimitDenial, rateLimitCheck } from './rate-limit-check.js';
import { settleAfterResponse } from './refund.js';

export interface ExpressRateLimitOptions<Req extends Request = Request> extends RateLimitCheckOptions<Req> {
  /**
   * Answers a 429 instead of the default writer. The headers (Retry-After,
   * RateLimit, legacy headers when on) are already set; `denial` carries the
   * decision, the default status and the body `message` made. An error it
   * throws or rejects with goes to next().
   */
  handler?: (request: Req, response: Response, next: NextFunction, denial: RateLimitDenial) => void | Promise<void>;
}

/**
 * Express middleware: runs the check before the route handler. Denied: 429
 * (or 503 when the limiter is unavailable under fail_closed) with the JSON
 * body and headers; input the quota service refuses: 400 invalid_request;
 * allowed: the RateLimit headers, then next().
 */
export function expressRateLimit<Req extends Request = Request>(options: ExpressRateLimitOptions<Req>): RequestHandler {
  const check = rateLimitCheck(options);
  const { handler } = options;
  return (request: Request, response: Response, next: NextFunction) => {
    // Req only adds what the app's own middleware set on the request (e.g. its principal).
    const req = request as Req;
    check(req).then((outcome) => {
      response.set(outcome.headers);
      if (outcome.action === 'continue') {
        if (outcome.reservation !== undefined) settleAfterResponse(options, req, outcome.reservation, response);
        next();
      } else if (outcome.status === 429 && handler !== undefined) {
        try {
          const done = handler(req, response, next, outcome);
          if (done !== undefined) done.then(undefined, next);
        } catch (error) {
          next(error);
        }
      } else response.status(outcome.status).json(outcome.body);
    }, next);
  };
}
