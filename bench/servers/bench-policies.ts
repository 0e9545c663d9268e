// The benches' policies: the in-process service (quota-server.ts) and the service as its
// image runs it (bench/workers-service.ts) read the same file.

/**
 * A bucket so large that no user runs dry during a run: every call is a real
 * allowed decision that runs the token bucket Lua script (read, refill, spend,
 * HSET, PEXPIRE), not a cheap denial. The load also spreads over many users
 * (bench/client.ts), so the keys are many, as in production.
 */
export const BENCH_POLICIES_YAML = `
policies:
  bench:
    description: Benchmark only; a bucket that never runs dry.
    limits:
      - name: bench
        key_by: user
        algorithm: token_bucket
        capacity: 1000000000
        refill_per_second: 1000000
  bench-tenant:
    description: Benchmark only; a user bucket and a per-minute window per tenant (two slots on a cluster), never runs dry.
    limits:
      - name: bench
        key_by: user
        algorithm: token_bucket
        capacity: 1000000000
        refill_per_second: 1000000
      - name: bench-tenant-minute
        key_by: tenant
        algorithm: fixed_window
        limit: 1000000000000
        window: minute
  bench-multi:
    description: Benchmark only; the orders.create shape (user bucket, user and tenant per minute), never runs dry.
    limits:
      - name: bench
        key_by: user
        algorithm: token_bucket
        capacity: 1000000000
        refill_per_second: 1000000
      - name: bench-user-minute
        key_by: user
        algorithm: fixed_window
        limit: 1000000000000
        window: minute
      - name: bench-tenant-minute
        key_by: tenant
        algorithm: fixed_window
        limit: 1000000000000
        window: minute
  bench-hot:
    description: Benchmark only; one tenant-wide bucket that never runs dry, with slices (bench/slices-run.ts).
    limits:
      - name: bench-hot
        key_by: tenant
        algorithm: token_bucket
        capacity: 1000000000
        refill_per_second: 1000000
        slices: { share: 0.05, max_units: 1000, ttl_ms: 250 }
  bench-window:
    description: Benchmark only; a fixed window per user that never fills, the algorithm of the limiters it is compared with.
    limits:
      - name: bench-window
        key_by: user
        algorithm: fixed_window
        limit: 1000000000000
        window: hour
`;
