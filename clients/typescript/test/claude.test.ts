// The Claude Agent SDK (TypeScript) SessionStore: the 14 contracts on the
// SDK's InMemorySessionStore and on CtxSessionStore against a live ctx
// serve, none skipped; then what the contracts cannot see.
import { InMemorySessionStore, type SessionStore } from "@anthropic-ai/claude-agent-sdk";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, describe, expect, test } from "vitest";

import { CtxSessionStore } from "../src/claude.js";
import { counted } from "./counting.js";
import { client, unique } from "./live.js";
import { CONTRACTS } from "./session-store-contracts.js";

const STORES: [string, () => SessionStore][] = [
  ["InMemorySessionStore", () => new InMemorySessionStore()],
  // Each contract's store on its own namespace: isolated on one server.
  ["CtxSessionStore", () => new CtxSessionStore(client(), { namespace: `claude-${unique()}` })],
];

const passed = new Map<string, number>();
const sdk = (
  JSON.parse(readFileSync(new URL("../node_modules/@anthropic-ai/claude-agent-sdk/package.json", import.meta.url), "utf8")) as {
    version: string;
  }
).version;

for (const [name, make] of STORES) {
  describe(`the SessionStore contracts on ${name}`, () => {
    for (const c of CONTRACTS) {
      test(`${c.n}. ${c.name}`, async () => {
        const probe = make();
        // None is skipped: each store has every optional method.
        for (const m of c.needs) expect(typeof probe[m]).toBe("function");
        await c.run(() => Promise.resolve(make()));
        passed.set(name, (passed.get(name) ?? 0) + 1);
      });
    }
  });
}

afterAll(() => {
  for (const [name] of STORES) {
    console.log(
      `@anthropic-ai/claude-agent-sdk ${sdk} SessionStore contracts (the Python SDK's 14, ported) on ${name}: ${passed.get(name) ?? 0}/${CONTRACTS.length} passed`,
    );
  }
});

describe("CtxSessionStore", () => {
  test("a re-sent batch is not appended twice, and a concurrent writer's entries are kept", async () => {
    const ns = `claude-${unique()}`;
    const key = { projectKey: "/work/proj", sessionId: "0f6a1c2e-0000-4000-8000-000000000001" };
    const a = new CtxSessionStore(client(), { namespace: ns });
    const b = new CtxSessionStore(client(), { namespace: ns });
    const first = [{ type: "user", uuid: "u1", message: { role: "user", content: "hi" } }];
    await a.append(key, first);
    await b.append(key, [{ type: "assistant", uuid: "a1", message: { role: "assistant", content: "hello" } }]);
    // a's tip is stale: its next append rebases on b's, and a re-send is a no-op.
    await a.append(key, first);
    await a.append(key, [{ type: "user", uuid: "u2", message: { role: "user", content: "more" } }]);
    expect((await a.load(key))!.map((x) => x.uuid)).toEqual(["u1", "a1", "u2"]);
  });

  test("names its refs as the Python store and the hooks do", () => {
    const s = new CtxSessionStore(client());
    expect(s.refName({ projectKey: "/home/me/proj.x", sessionId: "s-1", subpath: "subagents/agent 1" })).toBe(
      "claude/_2Fhome_2Fme_2Fproj_2Ex/s-1/subagents/agent_201",
    );
    const long = s.refName({ projectKey: "p".repeat(300), sessionId: "0f6a1c2e-0000-4000-8000-000000000001" });
    expect(long.length).toBeLessThanOrEqual(200);
    expect(long).toMatch(/^claude\/p+-[0-9a-f]{16}\/0f6a1c2e-0000-4000-8000-000000000001$/);
  });
});

describe("CtxSessionStore requests", () => {
  test("append and load are one request each once the tip is known", async () => {
    const { client: c, sent } = counted();
    const ns = `claude-${unique()}`;
    const store = new CtxSessionStore(c, { namespace: ns });
    const key = { projectKey: "p", sessionId: randomUUID() };
    const sub = { ...key, subpath: "subagents/agent-1" };
    const entries = (i: number) => [
      { type: "user", uuid: `u-${i}`, message: { role: "user", content: `q ${i}` } },
      { type: "x", uuid: `a-${i}`, text: `a ${i}` },
    ];
    // A key this store has not seen: the read of the ref (404), then the
    // folded summary and the checkpoint in one batch.
    expect(await sent(() => store.append(key, entries(0)))).toEqual(["read", "batch"]);
    // Steady state on a main transcript: one request.
    expect(await sent(() => store.append(key, entries(1)))).toEqual(["batch"]);
    // A subagent transcript has no summary.
    expect(await sent(() => store.append(sub, entries(2)))).toEqual(["read", "checkpoint"]);
    expect(await sent(() => store.append(sub, entries(3)))).toEqual(["checkpoint"]);
    // load: the tip and its entries, one request.
    let loaded: unknown;
    expect(await sent(async () => (loaded = await store.load(key)))).toEqual(["read"]);
    expect(loaded).toEqual([...entries(0), ...entries(1)]);
    // A store in a new process reads the transcript, the tip and its summary, then appends.
    const resumed = new CtxSessionStore(c, { namespace: ns });
    expect(await sent(() => resumed.append(key, entries(4)))).toEqual(["read", "get_commit", "download_artifact", "batch"]);
    // A key never written: the read's 404 is the answer.
    expect(await sent(() => store.load({ projectKey: "p", sessionId: randomUUID() }))).toEqual(["read"]);
  });
});
