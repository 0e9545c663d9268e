import { z } from 'zod';

/**
 * A limit's `slices` option (docs/policies.md, "Slices"): a holder may lease
 * a share of the limit's available units from the shared state and decide
 * from it locally. Off unless the limit names it.
 */

/** The algorithms a slice can be taken from: those whose spend and refund are plain unit counts. */
export const SLICE_ALGORITHMS = ['token_bucket', 'gcra', 'fixed_window'] as const;

/** A slice lives at most this long: its unused units are lost for that long when its holder dies. */
export const SLICE_TTL_MAX_MS = 60_000;

export const slicesSchema = z.strictObject({
  /** The largest fraction of what is available now that one holder takes at once. */
  share: z.number({ error: 'must be a number above 0 and at most 1' }).gt(0, 'must be above 0').lte(1, 'must be at most 1'),
  /** The most units one slice holds. */
  max_units: z.number({ error: 'must be a whole number, at least 1' }).int('must be a whole number').min(1, 'must be at least 1').max(1e12),
  /** How long a slice lives: its holder decides from it that long, then gives back what it did not use. */
  ttl_ms: z
    .number({ error: 'must be a whole number of ms, at least 1' })
    .int('must be a whole number of ms')
    .min(1, 'must be at least 1 ms')
    .max(SLICE_TTL_MAX_MS, `at most ${SLICE_TTL_MAX_MS} ms: a crashed holder's units are lost that long`),
});

export type SlicesDefinition = z.infer<typeof slicesSchema>;

/** A limit's slice option as the holders and stores take it. */
export interface SliceOptions {
  readonly share: number;
  readonly maxUnits: number;
  readonly ttlMs: number;
}

export function toSliceOptions(definition: SlicesDefinition): SliceOptions {
  return Object.freeze({ share: definition.share, maxUnits: definition.max_units, ttlMs: definition.ttl_ms });
}

/** Whether slices can be taken from a limit of this algorithm. */
export function slicesSupported(algorithm: string): boolean {
  return (SLICE_ALGORITHMS as readonly string[]).includes(algorithm);
}

/** Why a limit of `algorithm` cannot have slices; the limit's name in it. */
export function slicesRefusal(limitName: string, algorithm: string): string {
  return `limit "${limitName}" uses ${algorithm}, which cannot lease slices: slices work with ${SLICE_ALGORITHMS.join(', ')} only (remove the slices key)`;
}
