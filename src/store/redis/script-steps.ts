import { asError, type GroupDecision } from '@quota-service/core';
import { type ScriptedStep, tellRecord } from '../store.js';
import type { ScriptStep } from './cross-slot/saga.js';
import { parseDecideReply, parseSettleReply } from './script/decide-reply.js';

/** One script call for a step whose keys share a slot: the record of a request id at its first limit. */
export function scriptStepOf(step: ScriptedStep): ScriptStep {
  switch (step.mode) {
    case 'spend': {
      const placed = step.records?.memoAt(0);
      if (placed === undefined) return step.memo === undefined ? step : { calls: step.calls, mode: 'spend', options: { memo: step.memo } };
      return { calls: step.calls, mode: 'spend', options: { memo: { key: placed.key, ttlMs: placed.ttlMs, count: step.calls.length } } };
    }
    case 'refund':
      return {
        calls: step.calls,
        mode: 'refund',
        options: step.memo === undefined ? { spentAtMs: step.spentAtMs } : { spentAtMs: step.spentAtMs, memo: step.memo },
      };
    case 'settle': {
      const memo = step.records.memoAt(0);
      if (memo === undefined) throw new Error('a settlement needs a request id');
      return {
        calls: step.calls,
        mode: 'settle',
        options: { memo: { ...memo, count: step.calls.length }, actualCost: step.actualCost, memoIndex: 0 },
        settle: step,
      };
    }
    default:
      return step;
  }
}

/** A script step's reply as its decision; a settle step's record told. */
export function answerOf(step: ScriptStep, reply: unknown): GroupDecision | Error {
  try {
    if (step.mode !== 'settle') return parseDecideReply(reply, step.calls.length, step.options?.memo);
    const decision = parseSettleReply(reply, step.calls.length);
    if (step.settle !== undefined) tellRecord(step.settle, decision, 0);
    return decision;
  } catch (error) {
    return asError(error);
  }
}
