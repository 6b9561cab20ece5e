#!/usr/bin/env node
// Side-by-side bench of ctx-client/claude's CtxSessionStore against the
// Claude Agent SDK's (TypeScript) own stores, over a `ctx serve` on
// embedded storage that this script starts in a new temporary directory:
// - the SDK's InMemorySessionStore (not durable);
// - a JSONL file store written here to the SDK's SessionStore type (append
//   writes the lines and fsyncs the file; load reads it back): the durable
//   baseline, what Claude Code itself keeps on disk.
//
// Each turn is two transcript entries (a user message of ~300 bytes of
// text, an assistant message of ~900), as Claude Code writes them; the
// same entries as the Python bench (clients/python/bench/session_stores.py).
// - Sequential: one session, --turns appends one after the other (the SDK
//   serialises a session's appends), then --reads loads (a resume).
// - Concurrent: --sessions sessions at once on one store, each appending
//   --turns / --sessions turns in order; the rate is all appends over the
//   wall time.
// Bytes at rest: the JSONL files; ctx's whole data directory after the
// server stops.
//
// Usage (from clients/typescript, after `npm run build`):
//   node bench/session-stores.mjs --ctx ../../target/release/ctx [--turns 200] [--reads 20] [--sessions 8]
import { randomUUID } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";

import { InMemorySessionStore } from "@anthropic-ai/claude-agent-sdk";

import { CtxSessionStore } from "../dist/claude.js";
import { startServe, stopServe } from "../tools/serve.mjs";
import { Client } from "../dist/client.js";

const TEXT =
  "The quick brown fox jumps over the lazy dog while the agent weighs its next " +
  "tool call, reads the file it was given and writes down what it found. ";

/** A user and an assistant transcript entry, as Claude Code writes them. */
function turn(sessionId, i) {
  const pad = (n) => String(n).padStart(6, "0");
  const u = `${sessionId.slice(0, 8)}-u-${pad(i)}`;
  const a = `${sessionId.slice(0, 8)}-a-${pad(i)}`;
  const common = {
    isSidechain: false,
    userType: "external",
    cwd: "/home/dev/demo",
    sessionId,
    version: "2.1.0",
    gitBranch: "main",
    timestamp: `2026-11-26T10:${String(Math.floor(i / 60) % 60).padStart(2, "0")}:${String(i % 60).padStart(2, "0")}.000Z`,
  };
  return [
    { ...common, parentUuid: i ? `${sessionId.slice(0, 8)}-a-${pad(i - 1)}` : null, type: "user", message: { role: "user", content: `question ${i}: ${TEXT.repeat(2)}` }, uuid: u },
    {
      ...common,
      parentUuid: u,
      type: "assistant",
      message: {
        id: `msg_${pad(i)}`,
        type: "message",
        role: "assistant",
        model: "claude-sonnet-4-5",
        content: [{ type: "text", text: `answer ${i}: ${TEXT.repeat(6)}` }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: 10 * i, output_tokens: 200 },
      },
      requestId: `req_${pad(i)}`,
      uuid: a,
    },
  ];
}

/** The SDK's SessionStore on JSONL files, each append fsynced. */
class JsonlFileStore {
  constructor(root) {
    this.root = root;
  }
  path(key) {
    return join(this.root, encodeURIComponent(key.projectKey), `${key.sessionId}${key.subpath ? `/${key.subpath}` : ""}.jsonl`);
  }
  async append(key, entries) {
    const p = this.path(key);
    mkdirSync(dirname(p), { recursive: true });
    const fd = openSync(p, "a");
    try {
      writeSync(fd, entries.map((e) => `${JSON.stringify(e)}\n`).join(""));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
  async load(key) {
    try {
      return readFileSync(this.path(key), "utf8").split("\n").filter((l) => l).map((l) => JSON.parse(l));
    } catch (e) {
      if (e.code === "ENOENT") return null;
      throw e;
    }
  }
}

function bytesUnder(dir) {
  let n = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(entry.parentPath ?? entry.path, entry.name);
    n += entry.isDirectory() ? bytesUnder(p) : statSync(p).size;
  }
  return n;
}

async function run(store, turns, reads, sessions) {
  const project = "-home-dev-demo";
  // Sequential: one session.
  const key = { projectKey: project, sessionId: randomUUID() };
  let t = performance.now();
  for (let i = 0; i < turns; i++) await store.append(key, turn(key.sessionId, i));
  const appendRate = turns / ((performance.now() - t) / 1000);
  const loads = [];
  for (let i = 0; i < reads; i++) {
    const s = performance.now();
    const got = await store.load(key);
    loads.push(performance.now() - s);
    if (got.length !== 2 * turns) throw new Error(`load gave ${got.length} entries, not ${2 * turns}`);
  }
  loads.sort((a, b) => a - b);
  // Concurrent: `sessions` sessions at once.
  const per = Math.max(1, Math.floor(turns / sessions));
  t = performance.now();
  await Promise.all(
    Array.from({ length: sessions }, async () => {
      const k = { projectKey: project, sessionId: randomUUID() };
      for (let i = 0; i < per; i++) await store.append(k, turn(k.sessionId, i));
    }),
  );
  const concurrentRate = (per * sessions) / ((performance.now() - t) / 1000);
  return { appendRate, loadMs: loads[Math.floor(loads.length / 2)], concurrentRate };
}

async function main() {
  const { values } = parseArgs({
    options: { ctx: { type: "string" }, turns: { type: "string", default: "200" }, reads: { type: "string", default: "20" }, sessions: { type: "string", default: "8" } },
  });
  if (!values.ctx) throw new Error("--ctx PATH_TO_CTX is required");
  const turns = Number(values.turns);
  const reads = Number(values.reads);
  const sessions = Number(values.sessions);
  const raw = Array.from({ length: turns }, (_, i) => turn("00000000-0000-4000-8000-000000000000", i))
    .flat()
    .reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)) + 1, 0);
  const work = mkdtempSync(join(tmpdir(), "ctx-bench-"));
  const rows = [];
  try {
    rows.push(["InMemorySessionStore (not durable)", await run(new InMemorySessionStore(), turns, reads, sessions), null]);
    const files = join(work, "jsonl");
    rows.push(["JSONL files, fsync per append", await run(new JsonlFileStore(files), turns, reads, sessions), bytesUnder(files)]);
    const data = join(work, "ctx");
    const { proc, url, token } = await startServe(values.ctx, data);
    let ctxRow;
    try {
      ctxRow = await run(new CtxSessionStore(new Client({ url, token })), turns, reads, sessions);
    } finally {
      await stopServe(proc);
    }
    rows.push(["CtxSessionStore (ctx serve, embedded)", ctxRow, bytesUnder(data)]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  console.log(`${turns} turns (2 entries each; the sequential session's transcript is ${raw.toLocaleString("en")} bytes raw), ${reads} loads, ${sessions} concurrent sessions`);
  console.log("| store | appends/s, one session | load ms (median) | appends/s, concurrent | bytes at rest (all sessions) |");
  console.log("|---|---:|---:|---:|---:|");
  for (const [name, r, bytes] of rows) {
    console.log(`| ${name} | ${r.appendRate.toFixed(0)} | ${r.loadMs.toFixed(2)} | ${r.concurrentRate.toFixed(0)} | ${bytes === null ? "—" : bytes.toLocaleString("en")} |`);
  }
}

await main();
