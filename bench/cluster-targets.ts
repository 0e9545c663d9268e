/**
 * What the quota service on a 3-master Redis Cluster (without replicas) should
 * reach against one node, per policy as the report names it: the median of the
 * per-round ratios of bench/cluster.ts. The cluster with replicas is measured
 * for reference only.
 */
export const CLUSTER_TARGETS: Readonly<Record<string, number>> = {
  'one limit (user)': 0.8,
  'user + tenant (two slots)': 0.6,
};

/** The store the targets judge. */
export const JUDGED_STORE = 'cluster';
