// The README's TypeScript lines, run as written: each block is written to
// a module of this package (so its imports resolve as a user's would) that
// exports what the block made; the server and token come from CTX_SERVER
// and CTX_TOKEN, as `new Client()` reads them.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, test } from "vitest";

import type { CtxSessionStore } from "../src/claude.js";
import { live, unique } from "./live.js";

const here = dirname(fileURLToPath(import.meta.url));
const README = readFileSync(join(here, "..", "..", "..", "README.md"), "utf8");

/** The README's `ts` block between `<!-- marker -->` and `<!-- /marker -->`. */
export function block(marker: string): string {
  const m = new RegExp(`<!-- ${marker} -->\\n\`\`\`ts\\n([\\s\\S]*?)\`\`\`\\n<!-- /${marker} -->`).exec(README);
  if (!m) throw new Error(`README has no ${marker} block`);
  return m[1]!;
}

/** Runs a block as a module that exports `names`, with the live server in the environment. */
export async function run(marker: string, names: string[]): Promise<Record<string, unknown>> {
  const dir = join(here, "..", ".readme");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${marker}-${unique()}.ts`);
  writeFileSync(file, `${block(marker)}\nexport { ${names.join(", ")} };\n`);
  process.env.CTX_SERVER = live().url;
  process.env.CTX_TOKEN = live().token;
  try {
    return (await import(file)) as Record<string, unknown>;
  } finally {
    delete process.env.CTX_SERVER;
    delete process.env.CTX_TOKEN;
    rmSync(file, { force: true });
  }
}

test("the Claude Agent SDK (TypeScript) lines", async () => {
  expect(block("claude-sdk-ts").trim().split("\n")).toHaveLength(5);
  const { store, options } = (await run("claude-sdk-ts", ["store", "options"])) as {
    store: CtxSessionStore;
    options: { sessionStore: unknown };
  };
  expect(options.sessionStore).toBe(store);
  const key = { projectKey: `readme-${unique()}`, sessionId: "s" };
  await store.append(key, [{ type: "x", uuid: "1" }]);
  expect(await store.load(key)).toEqual([{ type: "x", uuid: "1" }]);
});

test("the LangGraph.js lines", async () => {
  const code = block("langgraph-ts");
  expect(code.trim().split("\n")).toHaveLength(5);
  // `builder` is the reader's StateGraph: a one-node messages graph here.
  const { StateGraph, MessagesAnnotation, START, END } = await import("@langchain/langgraph");
  const { AIMessage } = await import("@langchain/core/messages");
  const builder = new StateGraph(MessagesAnnotation)
    .addNode("reply", () => ({ messages: [new AIMessage("hello")] }))
    .addEdge(START, "reply")
    .addEdge("reply", END);
  (globalThis as { builder?: unknown }).builder = builder;
  try {
    const { graph, checkpointer } = (await run("langgraph-ts", ["graph", "checkpointer"])) as {
      graph: { invoke(input: unknown, config: unknown): Promise<{ messages: unknown[] }> };
      checkpointer: { getTuple(config: unknown): Promise<unknown> };
    };
    const config = { configurable: { thread_id: `readme-${unique()}` } };
    const out = await graph.invoke({ messages: [{ role: "user", content: "hi" }] }, config);
    expect(out.messages).toHaveLength(2);
    expect(await checkpointer.getTuple(config)).toBeTruthy();
  } finally {
    delete (globalThis as { builder?: unknown }).builder;
  }
});
