// A quota client in a process of its own (test/slices/replicas-and-clients.test.ts):
// createQuotaClient against the service at argv[2], with slices unless argv[6]
// is 'no-slices'. It prints "ready", waits for a line on stdin, then asks
// allow() of policy argv[3] for tenant argv[4] as fast as it can for argv[5]
// ms, 4 calls in flight. After every grant it writes the units granted so far
// and the decision's source (written before the grant counts as used), so a
// process killed with SIGKILL has reported all it granted. When it stops it
// writes "stopped", closes the client (giving back its slices), then "done".
import { writeSync } from 'node:fs';
import { once } from 'node:events';
import { createQuotaClient } from '@quota-service/client';

const [address, policy, tenant, durationText, mode] = process.argv.slice(2);
const client = createQuotaClient({ address: address!, deadlineMs: 5_000, slices: mode !== 'no-slices' });
// The client reads ListPolicies at start.
await new Promise((resolve) => setTimeout(resolve, 300));
writeSync(1, 'ready\n');
await once(process.stdin, 'data');
const end = Date.now() + Number(durationText);
let granted = 0;

async function loop(lane: number): Promise<void> {
  for (let i = 0; Date.now() < end; i++) {
    const cost = 1 + ((i + lane) % 3);
    const decision = await client.allow({ policy: policy!, identity: { tenant: tenant! }, cost });
    if (decision.allowed) {
      granted += cost;
      writeSync(1, `${granted} ${decision.source}\n`);
    }
  }
}
await Promise.all([0, 1, 2, 3].map(loop));
writeSync(1, 'stopped\n');
await client.close();
writeSync(1, 'done\n');
process.exit(0);
