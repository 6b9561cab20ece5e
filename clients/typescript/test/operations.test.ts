// One name per operation: each method of the client that sends an
// operation is named by its operationId in camelCase (`getCommit` for
// get_commit), read from the live server's document, and sends that
// operation; the others are the conveniences and plumbing named here.
import { expect, test } from "vitest";

import { Client } from "../src/client.js";
import { operationOf } from "./counting.js";
import { client } from "./live.js";

/** The methods named by no operation: conveniences over the operation they send first, and plumbing (`null`). */
const NOT_OPERATIONS: Record<string, string | null> = {
  readBytes: "read",
  listAllRefs: "list_refs",
  call: null,
  urlOf: null,
  request: null,
  delay: null,
  uploadDirect: null,
};

/** An operationId in camelCase: `get_commit` is `getCommit`. */
function camel(operationId: string): string {
  return operationId.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** The operations a method sends, called with placeholder arguments against a server that answers `{}`. */
async function sentBy(name: string): Promise<string[]> {
  const sent: string[] = [];
  const answer: typeof fetch = (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    sent.push(operationOf(init?.method ?? "GET", url));
    return Promise.resolve(new Response("{}", { status: 200, headers: { "content-type": "application/json" } }));
  };
  const c = new Client({ url: "http://ctx.test", token: "t", fetch: answer, retry: { maxRetries: 0 } });
  const method = (c as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>)[name]!;
  // `{}` is no valid answer for most: what matters is what was sent.
  await method.call(c, "a", "b").catch(() => undefined);
  return sent;
}

test("every method that sends an operation is named by its operationId in camelCase", async () => {
  const doc = (await client().call("openapi_json", { query: { all: true } })) as {
    paths: Record<string, Record<string, { operationId?: string }>>;
  };
  const ids = Object.values(doc.paths).flatMap((item) =>
    Object.values(item).flatMap((op) => (typeof op === "object" && op.operationId ? [op.operationId] : [])),
  );
  expect(ids.length).toBeGreaterThan(50);
  const byMethod = new Map(ids.map((id) => [camel(id), id]));
  const methods = Object.getOwnPropertyNames(Client.prototype).filter((n) => n !== "constructor");
  const named = methods.filter((n) => byMethod.has(n));
  expect(named.length).toBeGreaterThanOrEqual(10);
  for (const name of methods) {
    if (byMethod.has(name)) {
      expect((await sentBy(name))[0], `${name} sends another operation`).toBe(byMethod.get(name));
      continue;
    }
    expect(name in NOT_OPERATIONS, `${name} is named by no operationId (nor listed as a convenience)`).toBe(true);
    const over = NOT_OPERATIONS[name];
    if (over) expect((await sentBy(name))[0], `${name} is a convenience over another operation`).toBe(over);
  }
  // A listed convenience or plumbing method that is gone, or is now an operation's name, is a stale entry.
  for (const name of Object.keys(NOT_OPERATIONS)) {
    expect(methods, `${name} is no method of the client`).toContain(name);
    expect(byMethod.has(name), `${name} is an operation's name`).toBe(false);
  }
});
