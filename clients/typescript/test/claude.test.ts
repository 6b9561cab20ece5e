// The Claude Agent SDK (TypeScript) SessionStore: the 14 contracts on the
// SDK's InMemorySessionStore and on CtxSessionStore against a live ctx
// serve, none skipped; then what the contracts cannot see.
import { InMemorySessionStore, type SessionStore } from "@anthropic-ai/claude-agent-sdk";
import { readFileSync } from "node:fs";
import { afterAll, describe, expect, test } from "vitest";

import { CtxSessionStore } from "../src/claude.js";
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
