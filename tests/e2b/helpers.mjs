// Shared by the E2B tests: the private daemon's native API (its unix socket), for checks the
// SDK cannot make (how a sandbox maps onto a Paddock environment).
import http from 'node:http';

export function paddock(method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = http.request({
      socketPath: process.env.PADDOCK_SOCKET, method, path,
      headers: data ? { 'Content-Type': 'application/json', 'Content-Length': data.length } : {},
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let json = null;
        try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
        resolve({ status: res.statusCode, headers: res.headers, json, text });
      });
    });
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A tag unique to this run, for metadata filters.
export const RUN = `r${process.pid}-${Date.now()}`;
