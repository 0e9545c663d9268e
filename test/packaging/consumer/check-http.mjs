import { createServer } from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import { expressRateLimit } from '@quota-service/http/express';
import { fastifyRateLimit } from '@quota-service/http/fastify';
import { check, eleventhDenied, ten } from './assert.mjs';

/** Express app, real server on 127.0.0.1:0: POST /api/orders behind expressRateLimit. */
export async function checkExpress(client) {
  await eleventhDenied('express', async (user) => {
    const runs = { count: 0 };
    const app = express();
    app.post('/api/orders', expressRateLimit({ client, policy: 'orders', identify: () => ({ user }) }), (_req, res) => {
      runs.count++;
      res.status(201).json({ ok: true });
    });
    const server = createServer(app);
    await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
    try {
      return await burst('express', `http://127.0.0.1:${server.address().port}/api/orders`, runs);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
}

/** Fastify app, real server on 127.0.0.1:0: POST /api/orders with fastifyRateLimit as its onRequest hook. */
export async function checkFastify(client) {
  await eleventhDenied('fastify', async (user) => {
    const runs = { count: 0 };
    const app = Fastify();
    app.post('/api/orders', { onRequest: fastifyRateLimit({ client, policy: 'orders', identify: () => ({ user }) }) }, async (_req, reply) => {
      runs.count++;
      return reply.code(201).send({ ok: true });
    });
    const address = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      return await burst('fastify', `${address}/api/orders`, runs);
    } finally {
      await app.close();
    }
  });
}

/** Ten POSTs answered 201, then the 11th: 429 with Retry-After and the JSON error body, the handler not run. */
async function burst(label, url, runs) {
  const post = () => fetch(url, { method: 'POST' });
  await ten(async (i) => {
    const response = await post();
    const text = await response.text();
    check(response.status === 201, `${label}: POST #${i} answered ${response.status}: ${text}`);
  });
  const response = await post();
  const text = await response.text();
  if (response.status === 201) return 'admitted';
  check(response.status === 429, `${label}: the 11th POST answered ${response.status}, not 429: ${text}`);
  const retryAfter = response.headers.get('retry-after');
  check(/^\d+$/.test(retryAfter ?? '') && Number(retryAfter) >= 1, `${label}: Retry-After is ${JSON.stringify(retryAfter)}, not an integer >= 1`);
  const body = parseJson(text);
  check(body !== undefined, `${label}: the 429 body is not JSON: ${text}`);
  check(body.error === 'rate_limit_exceeded', `${label}: the 429 body's error is ${JSON.stringify(body.error)}: ${text}`);
  check(body.policy === 'orders' && body.limit === 'orders', `${label}: the 429 body names policy/limit ${body.policy}/${body.limit}: ${text}`);
  check(body.retry_after_ms > 0 && typeof body.message === 'string', `${label}: the 429 body lacks retry_after_ms or message: ${text}`);
  check(runs.count === 10, `${label}: the route handler ran ${runs.count} times, expected 10 (the 429 must not reach it)`);
  return 'denied';
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
