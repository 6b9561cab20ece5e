// The 14 behavioural contracts of a Claude Agent SDK `SessionStore`, as the
// Python SDK's conformance suite states them
// (claude_agent_sdk.testing.run_session_store_conformance). The TypeScript
// SDK ships the interface and InMemorySessionStore but no such suite, so
// this is that suite's port: the same contracts, in the same order, with
// the TypeScript key and summary shapes. Each one takes a fresh store.
import type { SessionKey, SessionStore, SessionStoreEntry } from "@anthropic-ai/claude-agent-sdk";
import { foldSessionSummary } from "@anthropic-ai/claude-agent-sdk";
import { expect } from "vitest";

type Fresh = () => Promise<SessionStore>;
type Optional = "listSessions" | "listSessionSummaries" | "delete" | "listSubkeys";

export interface Contract {
  n: number;
  name: string;
  /** The optional methods the contract needs: the store must have them (nothing is skipped). */
  needs: Optional[];
  run(fresh: Fresh): Promise<void>;
}

const KEY: SessionKey = { projectKey: "proj", sessionId: "sess" };
const SUB1: SessionKey = { ...KEY, subpath: "subagents/agent-1" };
const SUB2: SessionKey = { ...KEY, subpath: "subagents/agent-2" };

/** A test entry: `type` is required; adapters treat entries as opaque. */
function e(fields: Record<string, unknown>): SessionStoreEntry {
  return { type: "x", ...fields };
}

// The optional methods, called where a contract needs them (present by then).
const list = (s: SessionStore, p: string) => s.listSessions!(p);
const summaries = (s: SessionStore, p: string) => s.listSessionSummaries!(p);
const del = (s: SessionStore, k: SessionKey) => s.delete!(k);
const subkeys = (s: SessionStore, k: { projectKey: string; sessionId: string }) => s.listSubkeys!(k);

export const CONTRACTS: Contract[] = [
  {
    n: 1,
    name: "append then load returns the same entries in the same order",
    needs: [],
    async run(fresh) {
      const s = await fresh();
      await s.append(KEY, [e({ uuid: "b", n: 1 }), e({ uuid: "a", n: 2 })]);
      expect(await s.load(KEY)).toEqual([e({ uuid: "b", n: 1 }), e({ uuid: "a", n: 2 })]);
    },
  },
  {
    n: 2,
    name: "load of an unknown key returns null",
    needs: [],
    async run(fresh) {
      const s = await fresh();
      expect(await s.load({ projectKey: "proj", sessionId: "nope" })).toBeNull();
      await s.append(KEY, [e({ uuid: "x", n: 1 })]);
      expect(await s.load({ ...KEY, subpath: "nope" })).toBeNull();
    },
  },
  {
    n: 3,
    name: "several appends keep their call order",
    needs: [],
    async run(fresh) {
      const s = await fresh();
      await s.append(KEY, [e({ uuid: "z", n: 1 })]);
      await s.append(KEY, [e({ uuid: "a", n: 2 }), e({ uuid: "m", n: 3 })]);
      await s.append(KEY, [e({ uuid: "b", n: 4 })]);
      expect(await s.load(KEY)).toEqual([
        e({ uuid: "z", n: 1 }),
        e({ uuid: "a", n: 2 }),
        e({ uuid: "m", n: 3 }),
        e({ uuid: "b", n: 4 }),
      ]);
    },
  },
  {
    n: 4,
    name: "append([]) changes nothing",
    needs: [],
    async run(fresh) {
      const s = await fresh();
      await s.append(KEY, [e({ uuid: "a", n: 1 })]);
      await s.append(KEY, []);
      expect(await s.load(KEY)).toEqual([e({ uuid: "a", n: 1 })]);
    },
  },
  {
    n: 5,
    name: "a subpath key is stored apart from the main transcript",
    needs: [],
    async run(fresh) {
      const s = await fresh();
      await s.append(KEY, [e({ uuid: "m", n: 1 })]);
      await s.append(SUB1, [e({ uuid: "s", n: 1 })]);
      expect(await s.load(KEY)).toEqual([e({ uuid: "m", n: 1 })]);
      expect(await s.load(SUB1)).toEqual([e({ uuid: "s", n: 1 })]);
    },
  },
  {
    n: 6,
    name: "project keys are isolated",
    needs: [],
    async run(fresh) {
      const s = await fresh();
      await s.append({ projectKey: "A", sessionId: "s1" }, [e({ from: "A" })]);
      await s.append({ projectKey: "B", sessionId: "s1" }, [e({ from: "B" })]);
      expect(await s.load({ projectKey: "A", sessionId: "s1" })).toEqual([e({ from: "A" })]);
      expect(await s.load({ projectKey: "B", sessionId: "s1" })).toEqual([e({ from: "B" })]);
      if (s.listSessions) {
        expect(await list(s, "A")).toHaveLength(1);
        expect(await list(s, "B")).toHaveLength(1);
      }
    },
  },
  {
    n: 7,
    name: "listSessions returns the project's session ids, mtime in epoch ms",
    needs: ["listSessions"],
    async run(fresh) {
      const s = await fresh();
      await s.append({ projectKey: "proj", sessionId: "a" }, [e({ n: 1 })]);
      await s.append({ projectKey: "proj", sessionId: "b" }, [e({ n: 1 })]);
      await s.append({ projectKey: "other", sessionId: "c" }, [e({ n: 1 })]);
      const sessions = await list(s, "proj");
      expect(sessions.map((x) => x.sessionId).sort()).toEqual(["a", "b"]);
      // Over 1e12: epoch milliseconds, not seconds.
      for (const x of sessions) expect(Number.isFinite(x.mtime) && x.mtime > 1e12).toBe(true);
      expect(await list(s, "never-appended-project")).toEqual([]);
    },
  },
  {
    n: 8,
    name: "listSessions leaves out subagent subpaths",
    needs: ["listSessions"],
    async run(fresh) {
      const s = await fresh();
      await s.append({ projectKey: "proj", sessionId: "main" }, [e({ n: 1 })]);
      await s.append({ projectKey: "proj", sessionId: "main", subpath: "subagents/agent-1" }, [e({ n: 1 })]);
      expect((await list(s, "proj")).map((x) => x.sessionId)).toEqual(["main"]);
    },
  },
  {
    n: 9,
    name: "delete of a main key, then load returns null",
    needs: ["delete"],
    async run(fresh) {
      const s = await fresh();
      await del(s, { projectKey: "proj", sessionId: "never-written" });
      await s.append(KEY, [e({ n: 1 })]);
      await del(s, KEY);
      expect(await s.load(KEY)).toBeNull();
    },
  },
  {
    n: 10,
    name: "delete of a main key takes its subkeys, and nothing else",
    needs: ["delete"],
    async run(fresh) {
      const s = await fresh();
      const other: SessionKey = { projectKey: "proj", sessionId: "sess2" };
      const otherProject: SessionKey = { projectKey: "other-proj", sessionId: KEY.sessionId };
      for (const k of [KEY, SUB1, SUB2, other, otherProject]) await s.append(k, [e({ n: 1 })]);
      await del(s, KEY);
      expect(await s.load(KEY)).toBeNull();
      expect(await s.load(SUB1)).toBeNull();
      expect(await s.load(SUB2)).toBeNull();
      expect(await s.load(other)).toHaveLength(1);
      expect(await s.load(otherProject)).toHaveLength(1);
      if (s.listSubkeys) expect(await subkeys(s, KEY)).toEqual([]);
      if (s.listSessions) expect((await list(s, KEY.projectKey)).map((x) => x.sessionId)).not.toContain(KEY.sessionId);
    },
  },
  {
    n: 11,
    name: "delete of a subpath key takes only that subkey",
    needs: ["delete"],
    async run(fresh) {
      const s = await fresh();
      for (const k of [KEY, SUB1, SUB2]) await s.append(k, [e({ n: 1 })]);
      await del(s, SUB1);
      expect(await s.load(SUB1)).toBeNull();
      expect(await s.load(SUB2)).toHaveLength(1);
      expect(await s.load(KEY)).toHaveLength(1);
      if (s.listSubkeys) expect(await subkeys(s, KEY)).toEqual(["subagents/agent-2"]);
    },
  },
  {
    n: 12,
    name: "listSubkeys returns a session's subpaths",
    needs: ["listSubkeys"],
    async run(fresh) {
      const s = await fresh();
      await s.append(KEY, [e({ n: 1 })]);
      await s.append(SUB1, [e({ n: 1 })]);
      await s.append(SUB2, [e({ n: 1 })]);
      await s.append({ projectKey: KEY.projectKey, sessionId: "other-sess", subpath: "subagents/agent-x" }, [e({ n: 1 })]);
      const got = await subkeys(s, KEY);
      expect([...got].sort()).toEqual(["subagents/agent-1", "subagents/agent-2"]);
      expect(got).not.toContain("subagents/agent-x");
    },
  },
  {
    n: 13,
    name: "listSubkeys leaves out the main transcript",
    needs: ["listSubkeys"],
    async run(fresh) {
      const s = await fresh();
      await s.append(KEY, [e({ n: 1 })]);
      expect(await subkeys(s, KEY)).toEqual([]);
      expect(await subkeys(s, { projectKey: "proj", sessionId: "never-appended" })).toEqual([]);
    },
  },
  {
    n: 14,
    name: "listSessionSummaries returns the persisted fold, which folds again",
    needs: ["listSessionSummaries"],
    async run(fresh) {
      const s = await fresh();
      const key: SessionKey = { projectKey: "proj", sessionId: "summ-sess" };
      await s.append(key, [
        e({ timestamp: "2024-01-01T00:00:00.000Z", customTitle: "first" }),
        e({ timestamp: "2024-01-01T00:00:01.000Z" }),
      ]);
      await s.append(key, [e({ timestamp: "2024-01-01T00:00:02.000Z", customTitle: "second" })]);
      await s.append({ projectKey: "other", sessionId: "elsewhere" }, [e({ timestamp: "2024-01-01T00:00:00.000Z" })]);
      const got = await summaries(s, "proj");
      expect(got.map((x) => x.sessionId)).toEqual(["summ-sess"]);
      const summ = got[0]!;
      expect(Number.isFinite(summ.mtime) && summ.mtime > 1e12).toBe(true);
      // The summary's mtime is a storage time on listSessions' clock, not an entry's.
      if (s.listSessions) {
        const listed = new Map((await list(s, "proj")).map((x) => [x.sessionId, x.mtime]));
        expect(summ.mtime).toBeGreaterThanOrEqual(listed.get("summ-sess")!);
      }
      // `data` is opaque: it must fold again, and the fold keeps mtime.
      expect(typeof summ.data).toBe("object");
      const refolded = foldSessionSummary(summ, key, [e({ timestamp: "2024-01-01T00:00:03.000Z" })]);
      expect(refolded.sessionId).toBe("summ-sess");
      expect(refolded.mtime).toBe(summ.mtime);
      // A subagent's appends leave the main session's summary as it was.
      await s.append({ ...key, subpath: "subagents/agent-1" }, [
        e({ timestamp: "2024-01-01T00:00:09.000Z", customTitle: "subagent" }),
      ]);
      const after = new Map((await summaries(s, "proj")).map((x) => [x.sessionId, x]));
      expect(after.get("summ-sess")!.data).toEqual(summ.data);
      expect(await summaries(s, "never-appended-project")).toEqual([]);
      if (s.delete) {
        await del(s, key);
        expect(await summaries(s, "proj")).toEqual([]);
      }
    },
  },
];
