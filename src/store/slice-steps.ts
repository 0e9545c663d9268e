import { asError, type GroupDecision } from '@quota-service/core';
import type { DecideStep, ScriptedStep, SliceStep } from './store.js';

/**
 * A store's decide for steps that may include slice steps: the slice steps
 * go to `slice`, the others together to `scripted`, and the answers come
 * back in the steps' order. Undefined when there is no slice step (the usual
 * case), so the store decides the steps as they are.
 */
export function decideWithSlices(
  steps: readonly DecideStep[],
  scripted: (steps: readonly ScriptedStep[]) => Promise<Array<GroupDecision | Error>>,
  slice: (step: SliceStep) => Promise<GroupDecision>,
): Promise<Array<GroupDecision | Error>> | undefined {
  let any = false;
  for (let i = 0; i < steps.length; i++) if (steps[i]!.mode === 'slice') any = true;
  if (!any) return undefined;
  const rest: ScriptedStep[] = [];
  const places: number[] = [];
  const answers = new Array<Promise<GroupDecision | Error>>(steps.length);
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i]!;
    if (step.mode === 'slice') answers[i] = slice(step).catch(asError);
    else {
      places.push(i);
      rest.push(step);
    }
  }
  const decided = rest.length === 0 ? Promise.resolve([]) : scripted(rest);
  return decided.then(async (scriptedAnswers) => {
    for (let j = 0; j < places.length; j++) answers[places[j]!] = Promise.resolve(scriptedAnswers[j] ?? new Error('the store answered no decision'));
    return Promise.all(answers);
  });
}
