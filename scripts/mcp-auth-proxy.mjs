// Test fixture for scripts/mcp-conformance.sh: the MCP conformance suite cannot send a
// bearer token, so this forwards every request to the reference server with a dev
// token added, as an authenticated host would. Everything else (Host header
// included) passes through unchanged, so the server's own checks still apply.
// Usage: node scripts/mcp-auth-proxy.mjs <listen port> <target port> <token>
import http from 'node:http';

const [listenPort, targetPort, token] = process.argv.slice(2);
http
  .createServer((req, res) => {
    const upstream = http.request(
      { host: '127.0.0.1', port: Number(targetPort), method: req.method, path: req.url, headers: { ...req.headers, authorization: `Bearer ${token}` } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(upstream);
  })
  .listen(Number(listenPort), '127.0.0.1');
