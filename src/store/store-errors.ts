import { StoreUnavailableError } from '@quota-service/core';

/** Redis errors that mean "not now" rather than "this script is wrong". */
const TRANSIENT_REPLY = /^(LOADING|BUSY|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|READONLY|NOREPLICAS|MOVED|ASK)\b/;

/** A script error as it is (a bug to surface); anything else means the store is unavailable now. */
export function storeError(error: unknown): unknown {
  return isScriptError(error) ? error : new StoreUnavailableError(error);
}

/** A reply error from the script itself is a bug to surface, not an outage. */
function isScriptError(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError' && !TRANSIENT_REPLY.test(error.message);
}
