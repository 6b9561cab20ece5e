// One Claude session written by the three writers ctx has for it, each
// resuming from the others: the Claude Code hook (`ctx hook claude-code`),
// this TypeScript store and the Python store (ctx_client.claude, run by
// the Python client's test venv), then exported by `ctx export` as the
// transcript Claude Code itself would have written.
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, test } from "vitest";

import type { SessionStoreEntry } from "@anthropic-ai/claude-agent-sdk";
import { CtxSessionStore } from "../src/claude.js";
import { client, live, unique } from "./live.js";

const here = dirname(fileURLToPath(import.meta.url));
const pythonSrc = join(here, "..", "..", "python", "src");
const work = mkdtempSync(join(tmpdir(), "ctx-cross-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests with tests/typescript/run`);
  return value;
}

/** A conversation as Claude Code writes it: turns chained by parentUuid, text, a tool call and its result. */
function conversation(sid: string): SessionStoreEntry[] {
  const out: SessionStoreEntry[] = [];
  let parent: string | null = null;
  for (let i = 0; i < 3; i++) {
    const u = randomUUID();
    const a = randomUUID();
    const at = (s: number) => `2026-01-01T00:0${i}:0${s}.000Z`;
    out.push({
      type: "user",
      uuid: u,
      parentUuid: parent,
      sessionId: sid,
      timestamp: at(0),
      message: { role: "user", content: `question ${i}: naïve café — “quotes” \\ and\nnewline ✓` },
    });
    out.push({
      type: "assistant",
      uuid: a,
      parentUuid: u,
      sessionId: sid,
      timestamp: at(1),
      message: {
        role: "assistant",
        content: [
          { type: "text", text: `answer ${i}` },
          { type: "tool_use", id: `toolu_${i}`, name: "Read", input: { path: `/tmp/f${i}.txt`, limit: 10 } },
        ],
      },
    });
    parent = a;
  }
  return out;
}

const jsonl = (entries: SessionStoreEntry[]) => entries.map((e) => `${JSON.stringify(e)}\n`).join("");

/** The Python store: loads the key, then appends `append` (when given); answers what it loaded. */
function python(key: { project_key: string; session_id: string }, append: SessionStoreEntry[]): SessionStoreEntry[] {
  const script = `
import json, sys, anyio
from ctx_client import AsyncClient
from ctx_client.claude import CtxSessionStore
args = json.load(sys.stdin)
async def main():
    async with AsyncClient(args["url"], token=args["token"]) as c:
        store = CtxSessionStore(c)
        loaded = await store.load(args["key"])
        if args["append"]:
            await store.append(args["key"], args["append"])
        print(json.dumps(loaded))
anyio.run(main)
`;
  const done = spawnSync(need("CTX_TEST_PYTHON"), ["-c", script], {
    input: JSON.stringify({ ...live(), key, append }),
    env: { ...process.env, PYTHONPATH: pythonSrc },
    encoding: "utf8",
    timeout: 60_000,
  });
  expect(done.status, done.stderr).toBe(0);
  return JSON.parse(done.stdout) as SessionStoreEntry[];
}

/** Claude Code's Stop hook on the transcript file. */
function stopHook(sid: string, transcript: string): void {
  const done = spawnSync(need("CTX_TEST_BIN"), ["hook", "claude-code", "--server", live().url, "--data", join(work, "d")], {
    input: JSON.stringify({ session_id: sid, transcript_path: transcript, cwd: work, hook_event_name: "Stop" }),
    env: { CTX_TOKEN: live().token, PATH: "/usr/bin:/bin" },
    encoding: "utf8",
    timeout: 60_000,
  });
  expect(done.status).toBe(0);
  expect(done.stderr).not.toContain("warning");
}

test("the hook, the TypeScript store and the Python store write one session; ctx export gives the transcript back", async () => {
  const sid = randomUUID();
  const projectKey = `-tmp-${unique()}`;
  const key = { projectKey, sessionId: sid };
  const entries = conversation(sid);
  const transcript = join(work, "projects", projectKey, `${sid}.jsonl`);
  mkdirSync(dirname(transcript), { recursive: true });

  // Claude Code writes the first turn; its Stop hook checkpoints it.
  writeFileSync(transcript, jsonl(entries.slice(0, 2)));
  stopHook(sid, transcript);

  // The TypeScript store resumes it, and the SDK's mirror sends turns 1-2 (turn 1 again).
  const ts = new CtxSessionStore(client());
  expect(await ts.load(key)).toEqual(entries.slice(0, 2));
  await ts.append(key, entries.slice(0, 4));

  // The Python store resumes what the TypeScript store wrote, and appends turn 3.
  expect(python({ project_key: projectKey, session_id: sid }, entries.slice(4))).toEqual(entries.slice(0, 4));

  // A fresh TypeScript store resumes the whole of it.
  expect(await new CtxSessionStore(client()).load(key)).toEqual(entries);

  // ctx export writes out the transcript Claude Code would have written, byte for byte.
  const exported = spawnSync(
    need("CTX_TEST_BIN"),
    ["export", ts.refName(key), "--server", live().url, "--token", live().token],
    { encoding: "utf8", timeout: 60_000 },
  );
  expect(exported.status, exported.stderr).toBe(0);
  expect(exported.stdout).toBe(jsonl(entries));

  // Three writers, one chain.
  const tip = (await client().getRef(ts.refName(key)))!.target;
  const history = await client().call("history", { path: { ctx: tip }, query: { depth: 100 } });
  expect(new Set(history.commits.map((c) => c.principal))).toEqual(new Set(["claude-code", "claude-agent-sdk"]));
  expect(history.commits).toHaveLength(3);
});
