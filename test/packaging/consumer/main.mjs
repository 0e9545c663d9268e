// The packaging test's consumer: copied into a project outside the repository where
// the packed @quota-service/* tarballs and their peers are installed, and run there
// with plain `node`. It imports the packages by name only, as a user's app would.
// QUOTA_SERVICE_ADDRESS: host:port of a running quota service with the default policies.
import { createQuotaClient } from '@quota-service/client';
import { CheckFailed } from './assert.mjs';
import { checkQuotaClient } from './check-client.mjs';
import { checkExpress, checkFastify } from './check-http.mjs';
import { checkReservationsAndLeases } from './check-leases.mjs';
import { checkMcp } from './check-mcp.mjs';
import { checkMcpV2 } from './check-mcp-v2.mjs';

const address = process.env.QUOTA_SERVICE_ADDRESS;
if (!address) {
  console.error('consumer: FAILED: set QUOTA_SERVICE_ADDRESS to the quota service host:port');
  process.exit(2);
}
console.log(`consumer: node ${process.version}`);

// A long deadline: on a loaded machine the default 250 ms could hand a decision to the
// failure policy (fail_closed), and the checks want the service's own answers.
const client = createQuotaClient({ address, deadlineMs: 5000 });
const checks = [
  ['quota client', checkQuotaClient],
  ['reservations and leases', checkReservationsAndLeases],
  ['express', checkExpress],
  ['fastify', checkFastify],
  ['mcp', checkMcp],
  ['mcp v2', checkMcpV2],
];
try {
  for (const [name, run] of checks) {
    await run(client);
    console.log(`consumer: ${name} ok`);
  }
  console.log('consumer: all checks passed');
} catch (error) {
  // A CheckFailed is a wrong answer; anything else (a missing export, a bad import) shows its stack.
  console.error(`consumer: FAILED: ${error instanceof CheckFailed ? error.message : (error?.stack ?? error)}`);
  process.exitCode = 1;
} finally {
  await client.close();
}
