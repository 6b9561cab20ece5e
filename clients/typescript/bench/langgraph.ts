// The LangGraph.js bench: the same N-turn chat (a StateGraph over
// MessagesAnnotation, so the messages channel is add_messages; ~220-byte
// questions, ~900-byte answers) run with LangGraph's MemorySaver, with
// SqliteSaver (@langchain/langgraph-checkpoint-sqlite, when it is
// installed: it is not a dependency of this package, see below) and with
// CtxSaver over a `ctx serve` this script starts on a fresh temporary data
// directory. For each: checkpoints/s (puts over the whole run, graph work
// included), the latest state's load (`graph.getState`, p50 and p99 of
// --loads, warm = the saver that ran the graph, cold = a new saver each time
// where the store outlives it), and storage bytes (MemorySaver: the bytes it
// holds; SqliteSaver: the database file with its WAL after close; ctx: the
// whole data directory after a clean stop).
//
//   bench/langgraph.sh [--ctx path/to/ctx] [--turns 100] [--loads 20]
//
// SqliteSaver needs better-sqlite3, a native module (its prebuilt binary is
// downloaded from GitHub at install; without that it compiles from source):
//   npm install --no-save @langchain/langgraph-checkpoint-sqlite@1.0.4
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";

import { Client } from "../src/client.js";
import { CtxSaver } from "../src/langgraph/index.js";
import { startServe, stopServe } from "../tools/serve.mjs";

interface Args {
  ctx: string;
  turns: number;
  loads: number;
}

function parseArgs(argv: string[]): Args {
  // No default binary: the numbers are a release build's (--ctx target/release/ctx).
  const args: Args = { ctx: "", turns: 100, loads: 20 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag}: a value is needed`);
    if (flag === "--ctx") args.ctx = resolve(value);
    else if (flag === "--turns") args.turns = Number(value);
    else if (flag === "--loads") args.loads = Number(value);
    else throw new Error(`unknown flag ${flag}: use --ctx, --turns, --loads`);
  }
  if (!args.ctx) throw new Error("--ctx PATH_TO_CTX is required (a release build: target/release/ctx)");
  return args;
}

function question(i: number): string {
  return `Question ${i}: ` + "what does the file say about checkpoints, and why does it matter here? ".repeat(3).slice(0, 205);
}

function answer(i: number): string {
  return `Answer ${i}: ` + "The file says a checkpoint is a commit; values are stored once by content. ".repeat(12).slice(0, 885);
}

function graph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode("bot", (state: typeof MessagesAnnotation.State) => ({
      messages: [new AIMessage({ content: answer(state.messages.length), id: `a-${state.messages.length}` })],
    }))
    .addEdge(START, "bot")
    .addEdge("bot", END)
    .compile({ checkpointer });
}

function countPuts(saver: BaseCheckpointSaver): () => number {
  let puts = 0;
  const put = saver.put.bind(saver);
  saver.put = (...args) => {
    puts += 1;
    return put(...args);
  };
  return () => puts;
}

function percentile(ms: number[], p: number): number {
  const sorted = [...ms].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function timeLoads(loads: number, load: () => Promise<unknown>): Promise<[number, number]> {
  await load(); // not timed: the first load warms the JIT for every saver alike
  const ms: number[] = [];
  for (let i = 0; i < loads; i++) {
    const t = performance.now();
    await load();
    ms.push(performance.now() - t);
  }
  return [percentile(ms, 50), percentile(ms, 99)];
}

function dirBytes(path: string): number {
  let total = 0;
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const p = join(path, entry.name);
    total += entry.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return total;
}

/** The bytes MemorySaver holds: every serialized checkpoint, metadata and write. */
function memoryBytes(saver: MemorySaver): number {
  let total = 0;
  const walk = (v: unknown): void => {
    if (v instanceof Uint8Array) total += v.length;
    else if (typeof v === "string") total += Buffer.byteLength(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") Object.values(v).forEach(walk);
  };
  walk(saver.storage);
  walk(saver.writes);
  return total;
}

interface Row {
  saver: string;
  checkpoints: number;
  seconds: number;
  warm: [number, number];
  cold: [number, number] | undefined;
  bytes: number;
}

async function chat(saver: BaseCheckpointSaver, turns: number): Promise<{ puts: number; seconds: number; config: object }> {
  const puts = countPuts(saver);
  const g = graph(saver);
  const config = { configurable: { thread_id: "bench" } };
  const t = performance.now();
  for (let i = 0; i < turns; i++) {
    await g.invoke({ messages: [new HumanMessage({ content: question(i), id: `q-${i}` })] }, config);
  }
  return { puts: puts(), seconds: (performance.now() - t) / 1000, config };
}

async function latestMessages(saver: BaseCheckpointSaver, config: object, turns: number): Promise<void> {
  const state = await graph(saver).getState(config);
  const n = (state.values as typeof MessagesAnnotation.State).messages.length;
  if (n !== 2 * turns) throw new Error(`the latest state has ${n} messages, not ${2 * turns}`);
}

async function benchMemory(args: Args): Promise<Row> {
  const saver = new MemorySaver();
  const run = await chat(saver, args.turns);
  const warm = await timeLoads(args.loads, () => latestMessages(saver, run.config, args.turns));
  return { saver: "MemorySaver", checkpoints: run.puts, seconds: run.seconds, warm, cold: undefined, bytes: memoryBytes(saver) };
}

/** Not a dependency: named by a variable, so that tsc does not look for it. */
const SQLITE: string = "@langchain/langgraph-checkpoint-sqlite";

interface SqliteModule {
  SqliteSaver: { fromConnString(path: string): BaseCheckpointSaver & { db: { close(): void } } };
}

async function benchSqlite(args: Args): Promise<Row | string> {
  let mod: SqliteModule;
  try {
    mod = (await import(SQLITE)) as SqliteModule;
  } catch (e) {
    return `not installed (${(e as Error).message.split("\n")[0]})`;
  }
  const dir = mkdtempSync(join(tmpdir(), "lg-sqlite-"));
  try {
    const file = join(dir, "checkpoints.db");
    const saver = mod.SqliteSaver.fromConnString(file);
    const run = await chat(saver, args.turns);
    const warm = await timeLoads(args.loads, () => latestMessages(saver, run.config, args.turns));
    const cold = await timeLoads(args.loads, async () => {
      const fresh = mod.SqliteSaver.fromConnString(file);
      await latestMessages(fresh, run.config, args.turns);
      fresh.db.close();
    });
    saver.db.close();
    const bytes = readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
    return { saver: "SqliteSaver", checkpoints: run.puts, seconds: run.seconds, warm, cold, bytes };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchCtx(args: Args): Promise<Row> {
  const dir = mkdtempSync(join(tmpdir(), "lg-ctx-"));
  const data = join(dir, "data");
  const server = await startServe(args.ctx, data);
  try {
    const client = new Client({ url: server.url, token: server.token });
    const saver = new CtxSaver(client);
    const run = await chat(saver, args.turns);
    const warm = await timeLoads(args.loads, () => latestMessages(saver, run.config, args.turns));
    const cold = await timeLoads(args.loads, () => latestMessages(new CtxSaver(client), run.config, args.turns));
    await stopServe(server.proc);
    return { saver: "CtxSaver", checkpoints: run.puts, seconds: run.seconds, warm, cold, bytes: dirBytes(data) };
  } finally {
    await stopServe(server.proc);
    rmSync(dir, { recursive: true, force: true });
  }
}

function ms([p50, p99]: [number, number]): string {
  return `${p50.toFixed(2)} / ${p99.toFixed(2)}`;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  console.log(`LangGraph.js bench: ${args.turns} turns, ${args.loads} loads; ctx ${args.ctx}; node ${process.version}`);
  const rows: (Row | string)[] = [await benchMemory(args), await benchSqlite(args), await benchCtx(args)];
  console.log("\n| saver | storage bytes | checkpoints | checkpoints/s | latest warm ms p50 / p99 | latest cold ms p50 / p99 |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    if (typeof r === "string") {
      console.log(`| SqliteSaver | ${r} | | | | |`);
      continue;
    }
    console.log(
      `| ${r.saver} | ${r.bytes.toLocaleString("en-US")} | ${r.checkpoints} | ${(r.checkpoints / r.seconds).toFixed(0)} | ` +
        `${ms(r.warm)} | ${r.cold ? ms(r.cold) : "n/a (in memory)"} |`,
    );
  }
}

await main();
