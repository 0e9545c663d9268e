import type { ServerResponse } from 'node:http';
import type { QuotaReservation, QuotaSettlement } from '@quota-service/core';

/** A refund's end: the settlement (status 'settled', or 'unavailable' when the service could not be asked), or the error that stopped it. */
export type RefundResult = { settlement: QuotaSettlement; error?: undefined } | { settlement?: undefined; error: unknown };

export interface RefundOptions<Req> {
  skipFailedRequests?: boolean;
  skipSuccessfulRequests?: boolean;
  onRefund?: (result: RefundResult, request: Req) => void;
}

/**
 * Once `response` is over, settles the reservation at 0 (gives its units back)
 * when the options say its status does not count: skipFailedRequests for a
 * status >= 400 or a response that closed before it was completely sent,
 * skipSuccessfulRequests for a status < 400. One Settle call per refund.
 */
export function settleAfterResponse<Req>(options: RefundOptions<Req>, request: Req, reservation: QuotaReservation, response: ServerResponse): void {
  let over = false;
  const end = () => {
    if (over) return;
    over = true;
    const failed = !response.writableFinished || response.statusCode >= 400;
    if (!(failed ? options.skipFailedRequests : options.skipSuccessfulRequests)) return;
    reservation.settle(0).then(
      (settlement) => options.onRefund?.({ settlement }, request),
      (error: unknown) => options.onRefund?.({ error }, request),
    );
  };
  response.once('finish', end);
  response.once('close', end);
}
