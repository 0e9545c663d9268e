/**
 * QUOTA_CLOCK_SKEW_ALLOWANCE_MS's default: how much later than its deadline a
 * request may arrive and still be decided (src/api/quota/stale-requests.ts).
 * Each connection (and caller on it) is measured against its own quickest
 * request, so the offset between a sender's clock and the service's cancels
 * out, and with one sender per connection a request is refused only once its
 * caller has given up: 0 needs no slack. It is for senders whose clocks differ
 * yet share a connection (behind an HTTP/2 proxy that pools connections).
 */
export const DEFAULT_CLOCK_SKEW_ALLOWANCE_MS = 0;
