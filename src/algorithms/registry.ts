import type { Algorithm } from './algorithm.js';
import { fixedWindow } from './fixed-window/fixed-window.js';
import { tokenBucket } from './token-bucket/token-bucket.js';

/** Every algorithm a policy can name, by its policy-file name. */
export const algorithms = {
  token_bucket: tokenBucket,
  fixed_window: fixedWindow,
  // `any`: each entry has its own parameter type, used both as input and output (scaleParams).
} as const satisfies Record<string, Algorithm<any>>;

export type AlgorithmName = keyof typeof algorithms;
