// Retries, against a small fake server on 127.0.0.1: 503 and 429 are sent
// again after their Retry-After, other errors are not, and a body that is
// not ctx's gets the kind of its status.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, test } from "vitest";

import { Client, retryAfterSeconds } from "../src/client.js";
import { RateLimitedError, UnavailableError } from "../src/errors.js";

type Reply = { status: number; headers?: Record<string, string>; body: string };
const servers: { close(): void }[] = [];
afterEach(() => servers.splice(0).forEach((s) => s.close()));

async function fake(replies: Reply[]): Promise<{ url: string; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      seen.push(`${req.method} ${req.url} ${body}`);
      const r = replies.shift() ?? { status: 500, body: "no more replies" };
      res.writeHead(r.status, { "content-type": "application/json", ...r.headers });
      res.end(r.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const ERR = (kind: string) => JSON.stringify({ error: { kind, message: kind } });
const REF = JSON.stringify({ name: "r", target: `ctx-${"1".repeat(32)}`, updated_at: "2026-01-01T00:00:00Z" });

test("503 and 429 are retried after Retry-After, the same request each time", async () => {
  const { url, seen } = await fake([
    { status: 503, headers: { "retry-after": "0" }, body: ERR("unavailable") },
    { status: 429, headers: { "retry-after": "0" }, body: ERR("rate_limited") },
    { status: 200, body: REF },
  ]);
  const c = new Client({ url, token: "t" });
  expect(await c.setRef("r", `ctx-${"1".repeat(32)}`)).toMatchObject({ name: "r" });
  expect(seen).toHaveLength(3);
  expect(new Set(seen).size).toBe(1);
});

test("it gives up after maxRetries with the error's kind", async () => {
  const { url, seen } = await fake(Array.from({ length: 5 }, () => ({ status: 429, body: ERR("rate_limited") })));
  const c = new Client({ url, token: "t", retry: { maxRetries: 2, backoff: 0 } });
  await expect(c.getRef("r")).rejects.toBeInstanceOf(RateLimitedError);
  expect(seen).toHaveLength(3);
});

test("other errors are not retried; a proxy's body gets its status's kind", async () => {
  const { url, seen } = await fake([{ status: 502, body: "<html>bad gateway</html>" }]);
  const c = new Client({ url, token: "t", retry: { maxRetries: 0 } });
  const e = await c.getRef("r").catch((x: unknown) => x);
  expect(e).toBeInstanceOf(UnavailableError);
  expect((e as UnavailableError).message).toContain("bad gateway");
  expect(seen).toHaveLength(1);
});

test("Retry-After as seconds or an HTTP date, the wait capped", () => {
  expect(retryAfterSeconds("3")).toBe(3);
  expect(retryAfterSeconds(null)).toBeUndefined();
  const later = retryAfterSeconds(new Date(Date.now() + 3600_000).toUTCString())!;
  expect(later).toBeGreaterThan(3500);
  expect(new Client({ url: "http://127.0.0.1:1", token: null }).delay(0, later)).toBe(30);
});
