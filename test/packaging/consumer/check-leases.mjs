import { check } from './assert.mjs';

/**
 * Reservations and leases from the packed client, in plain JavaScript on this Node.js:
 * a reservation settled with less than its estimate, and the cap of policy
 * orders.in-flight (20 per tenant) filled, then freed by disposing of one lease
 * through Symbol.asyncDispose (what `await using` calls).
 */
export async function checkReservationsAndLeases(client) {
  const user = `pkg-reserve-${process.pid}-${Date.now()}`;
  const reservation = await client.reserve({ policy: 'orders', identity: { user }, estimate: 5 });
  check(reservation.allowed && reservation.decision.source === 'store', `reserve: not granted by the service: ${JSON.stringify(reservation.decision)}`);
  const settlement = await reservation.settle(1);
  check(settlement.status === 'settled' && settlement.delta === -4, `settle: ${JSON.stringify(settlement)}`);

  check(typeof Symbol.asyncDispose === 'symbol', `Symbol.asyncDispose is missing on node ${process.version}`);
  const identity = { user, tenant: `pkg-tenant-${process.pid}-${Date.now()}` };
  const leases = [];
  for (let i = 0; i < 20; i++) leases.push(await client.acquire({ policy: 'orders.in-flight', identity }));
  check(
    leases.every((l) => l.acquired && l.held),
    'acquire: the first 20 leases of a tenant were not all granted',
  );
  const over = await client.acquire({ policy: 'orders.in-flight', identity });
  check(!over.acquired && over.decision.deniedBy === 'tenant-orders-in-flight', `acquire: the 21st lease: ${JSON.stringify(over.decision)}`);
  await leases[0][Symbol.asyncDispose]();
  check(!leases[0].held, 'dispose: the lease is still held');
  const next = await client.acquire({ policy: 'orders.in-flight', identity });
  check(next.acquired, 'acquire: disposing of a lease did not free its place');
  await Promise.all([next, ...leases].map((l) => l.release()));
}
