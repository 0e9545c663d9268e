import type { GroupDecision } from '@quota-service/core';
import type { DecideStep, QuotaStore } from '../../src/store/store.js';

/**
 * A store that takes every question and never answers: the honest way to make
 * the service slower than a client's deadline. `asked` counts the decisions
 * that reached it (proof the call got through); close() ends the wait.
 */
export class HangingStore implements QuotaStore {
  readonly description = 'a store that never answers';
  asked = 0;
  private readonly waiting: Array<(error: Error) => void> = [];

  decide(steps: readonly DecideStep[]): Promise<Array<GroupDecision | Error>> {
    this.asked += steps.length;
    return new Promise((_resolve, reject) => this.waiting.push(reject));
  }

  async remember(): Promise<void> {}

  async ready(): Promise<void> {}

  async close(): Promise<void> {
    for (const reject of this.waiting.splice(0)) reject(new Error('store closed'));
  }
}
