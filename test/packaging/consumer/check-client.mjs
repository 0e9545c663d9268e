import { check, eleventhDenied, ten } from './assert.mjs';

/** The quota client alone: 10 decisions allowed by the service, the 11th denied by limit `orders`. */
export async function checkQuotaClient(client) {
  await eleventhDenied('client', async (user) => {
    const ask = () => client.allow({ policy: 'orders', identity: { user } });
    await ten(async (i) => {
      const decision = await ask();
      check(decision.allowed === true, `client: allow() #${i} was denied: ${JSON.stringify(decision)}`);
      check(decision.source === 'store', `client: allow() #${i} came from ${decision.source}, not the service`);
    });
    const denied = await ask();
    if (denied.allowed) return 'admitted';
    const shown = JSON.stringify(denied);
    check(denied.deniedBy === 'orders', `client: the denial names limit ${JSON.stringify(denied.deniedBy)}, not orders: ${shown}`);
    check(denied.retryAfterMs > 0, `client: the denial has retryAfterMs ${denied.retryAfterMs}: ${shown}`);
    check(denied.source === 'store', `client: the denial came from ${denied.source}, not the service: ${shown}`);
    check(
      denied.limits.some((l) => l.name === 'orders'),
      `client: the denial carries no status of limit orders: ${shown}`,
    );
    return 'denied';
  });
}
