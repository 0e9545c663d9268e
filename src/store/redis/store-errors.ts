import { StoreUnavailableError } from '@quota-service/core';

/** Redis errors that mean "not now" rather than "this script is wrong". */
const TRANSIENT_REPLY = /^(LOADING|BUSY|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|READONLY|NOREPLICAS|MOVED|ASK)\b/;

/**
 * A call whose keys lie in several slots of one master (a node batch's whole decision)
 * that did not run: one of its slots is not on that master now (it moved, or
 * the map was stale). Nothing was written; decide it again slot by slot.
 */
export class SlotsApart extends Error {
  override name = 'SlotsApart';
}

/** A script error as it is (a bug to surface); anything else means the store is unavailable now. */
export function storeError(error: unknown): unknown {
  return isScriptError(error) ? error : new StoreUnavailableError(error);
}

/** A reply error from the script itself is a bug to surface, not an outage. */
function isScriptError(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError' && !TRANSIENT_REPLY.test(error.message);
}
