import { requestMemo, settlementMark, type ValidRequest } from '@quota-service/core';
import type { RequestRecords } from '../store/store.js';

/**
 * Where a request with a request id keeps its records (keys.ts): its
 * remembered decision and its settlement marks, at whichever limit the store
 * leads with. Undefined without a request id.
 */
export function requestRecords(request: ValidRequest): RequestRecords | undefined {
  if (request.requestId === '') return undefined;
  return { memoAt: (index) => requestMemo(request, index), markAt: (index) => settlementMark(request, index) };
}
