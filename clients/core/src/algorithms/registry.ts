import type { Algorithm } from './algorithm.js';
import { concurrency } from './concurrency/concurrency.js';
import { fixedWindow } from './fixed-window/fixed-window.js';
import { gcra } from './gcra/gcra.js';
import { leakyBucket } from './leaky-bucket/leaky-bucket.js';
import { slidingWindowCounter } from './sliding-window-counter/sliding-window-counter.js';
import { slidingWindowLog } from './sliding-window-log/sliding-window-log.js';
import { tokenBucket } from './token-bucket/token-bucket.js';

/** Every algorithm a policy can name, by its policy-file name. */
export const algorithms = {
  token_bucket: tokenBucket,
  fixed_window: fixedWindow,
  sliding_window_log: slidingWindowLog,
  sliding_window_counter: slidingWindowCounter,
  leaky_bucket: leakyBucket,
  gcra,
  concurrency,
  // `any`: each entry has its own parameter type, used both as input and output (scaleParams).
  // biome-ignore lint/suspicious/noExplicitAny: see above.
} as const satisfies Record<string, Algorithm<any>>;

export type AlgorithmName = keyof typeof algorithms;
