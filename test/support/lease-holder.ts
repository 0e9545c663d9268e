// A lease holder in a process of its own (test/leases/replicas.test.ts): it
// acquires a lease through the gRPC service at argv[2] for tenant argv[3]
// with request id argv[4] once told to (a line on stdin, after it printed
// "ready"), prints the answer as one JSON line, then holds the lease (never
// renews, never releases) until it is killed.
import { once } from 'node:events';
import { createChannel, createClient } from 'nice-grpc';
import { QuotaServiceDefinition } from '@quota-service/contract';

const [address, tenant, requestId] = process.argv.slice(2);
const client = createClient(QuotaServiceDefinition, createChannel(address!));
process.stdout.write('ready\n');
await once(process.stdin, 'data');
const answer = await client.allow({ policy: 'jobs', identity: { tenant: tenant! }, cost: 1, requestId: requestId! });
process.stdout.write(`${JSON.stringify({ allowed: answer.allowed, leaseExpiresInMs: answer.leaseExpiresInMs })}\n`);
setInterval(() => {}, 60_000);
