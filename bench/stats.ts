/** Nearest-rank percentile (p in 0..100) of values sorted ascending; NaN when empty. */
export function percentile(sortedAscending: ArrayLike<number>, p: number): number {
  const n = sortedAscending.length;
  if (n === 0) return Number.NaN;
  const rank = Math.min(n, Math.max(1, Math.ceil((p / 100) * n)));
  return sortedAscending[rank - 1] as number;
}

/** Median of a few numbers (the per-round figures); NaN when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}
