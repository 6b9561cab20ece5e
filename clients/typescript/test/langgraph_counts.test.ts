// What LangGraph's suite cannot see: the HTTP requests each CtxSaver
// operation sends, counted against the live server and pinned exactly
// (put = one batch on the common path, grown list included; putWrites one
// batch; a warm getTuple one read), a running graph costing one request per
// saver call, and writes that reach the saver before (or while) their
// checkpoint's put goes out.
import { randomUUID } from "node:crypto";

import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { JsonPlusSerializer, emptyCheckpoint, uuid6, type Checkpoint, type CheckpointMetadata } from "@langchain/langgraph-checkpoint";
import { afterAll, describe, expect, it } from "vitest";

import { Client } from "../src/client.js";
import { CtxSaver } from "../src/langgraph/index.js";
import { dropPrefix } from "./langgraph_initializer.mjs";
import { counted, type Counted } from "./counting.js";
import { client, live } from "./live.js";

async function requests<T>(c: Counted, op: () => Promise<T>): Promise<[string[], T]> {
  const mark = c.mark();
  const got = await op();
  return [c.since(mark), got];
}

const meta = (step: number): CheckpointMetadata => ({ source: "loop", step, parents: {} });

function checkpoint(values: Record<string, unknown>, versions: Record<string, number>): Checkpoint {
  return { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: versions };
}

const BATCH = "batch";
const READ = "read";

describe("CtxSaver requests per operation", () => {
  const prefix = `lgc-${randomUUID().slice(0, 8)}`;
  afterAll(async () => {
    await dropPrefix(new Client(live()), prefix);
  });

  it("put, putWrites and a warm getTuple are one request each; a cold getTuple reads its state, link and large value", async () => {
    const c = counted();
    const saver = new CtxSaver(c.client, { prefix });
    const thread = { configurable: { thread_id: `t-${randomUUID()}`, checkpoint_ns: "" } };
    const m1 = new HumanMessage({ content: "question one", id: "m1" });
    const m2 = new AIMessage({ content: "answer one", id: "m2" });
    const big = "x".repeat(4000); // over the inline limit: an artifact, inline in the batch

    const c1 = checkpoint({ messages: [m1], note: "small", blob: big }, { messages: 1, note: 1, blob: 1 });
    const [first, cfg1] = await requests(c, () => saver.put(thread, c1, meta(0), { messages: 1, note: 1, blob: 1 }));
    expect(first).toEqual([BATCH]);

    const [writes] = await requests(c, () => saver.putWrites(cfg1, [["messages", [m2]]], "task-1", "~bot"));
    expect(writes).toEqual([BATCH]);
    // The same writes again (a retried task): the saver holds the tip's state, and sends nothing.
    const [repeat] = await requests(c, () => saver.putWrites(cfg1, [["messages", [m2]]], "task-1", "~bot"));
    expect(repeat).toEqual([]);

    // The list grew: its new link and the document in the same batch.
    const c2 = checkpoint({ messages: [m1, m2], note: "small", blob: big + "y" }, { messages: 2, note: 1, blob: 2 });
    const [second, cfg2] = await requests(c, () => saver.put(cfg1, c2, meta(1), { messages: 2, blob: 2 }));
    expect(second).toEqual([BATCH]);

    const [warm, tuple] = await requests(c, () => saver.getTuple(cfg2));
    expect(warm).toEqual([READ]);
    expect(tuple?.checkpoint.channel_values).toEqual({ messages: [m1, m2], note: "small", blob: big + "y" });
    expect(tuple?.parentConfig?.configurable?.checkpoint_id).toBe(c1.id);

    // A saver with nothing cached: the state, then the messages' chain.
    const cold = new CtxSaver(c.client, { prefix });
    const [coldReqs, coldTuple] = await requests(c, () => cold.getTuple(cfg2));
    // The state, the messages' link, the large value.
    expect(coldReqs).toEqual([READ, READ, "download_artifact"]);
    expect(coldTuple).toEqual(tuple);
    const [first1] = await requests(c, () => cold.getTuple(cfg1));
    // Checkpoint 1's state and its link (a different commit than checkpoint 2's), and its blob.
    expect(first1.filter((r) => r === READ)).toHaveLength(2);
    expect((await cold.getTuple(cfg1))?.pendingWrites).toEqual([["task-1", "messages", [m2]]]);
  });

  it("past the common path: a second grown list is committed first, values past 1 MiB are uploaded first", async () => {
    const c = counted();
    const saver = new CtxSaver(c.client, { prefix });
    const thread = { configurable: { thread_id: `x-${randomUUID()}`, checkpoint_ns: "" } };
    const cfg = await saver.put(thread, checkpoint({ a: ["a0"], b: ["b0"] }, { a: 1, b: 1 }), meta(0), { a: 1, b: 1 });
    // Two lists grew: one link goes in the batch, the other is its own commit before it.
    const two = checkpoint({ a: ["a0", "a1"], b: ["b0", "b1"] }, { a: 2, b: 2 });
    const [grown, cfg2] = await requests(c, () => saver.put(cfg, two, meta(1), { a: 2, b: 2 }));
    expect(grown).toEqual(["checkpoint", BATCH]);
    // Three values of 400 KB: over the batch's 1 MiB of values, each is uploaded first.
    const big = (ch: string) => ch.repeat(400_000);
    const three = checkpoint({ a: ["a0", "a1"], b: ["b0", "b1"], x: big("x"), y: big("y"), z: big("z") }, { a: 2, b: 2, x: 1, y: 1, z: 1 });
    const [uploads] = await requests(c, () => saver.put(cfg2, three, meta(2), { x: 1, y: 1, z: 1 }));
    expect(uploads).toEqual(["upload_artifact", "upload_artifact", "upload_artifact", BATCH]);
    const got = await new CtxSaver(c.client, { prefix }).getTuple(thread);
    expect(got?.checkpoint.channel_values).toEqual(three.channel_values);
  });

  it("a list that is not an append (a message removed) is stored whole again, and reads back", async () => {
    const c = counted();
    const saver = new CtxSaver(c.client, { prefix });
    const thread = { configurable: { thread_id: `r-${randomUUID()}`, checkpoint_ns: "" } };
    const m = (i: number) => new HumanMessage({ content: `message ${i}`, id: `m${i}` });
    const cfg = await saver.put(thread, checkpoint({ messages: [m(1), m(2), m(3)] }, { messages: 1 }), meta(0), { messages: 1 });
    const removed = checkpoint({ messages: [m(1), m(3)] }, { messages: 2 });
    const [one, cfg2] = await requests(c, () => saver.put(cfg, removed, meta(1), { messages: 2 }));
    expect(one).toEqual([BATCH]);
    // The document's commit sits on its new link: a snapshot of the two messages, not a delta.
    const linkOf = async (id: string) => {
      const state = await c.client.read({ ref: saver.names.checkpoint(thread.configurable.thread_id, "", id), delta: true, stop: "compaction" });
      return c.client.getCommit(String(state.parent));
    };
    const link2 = await linkOf(removed.id);
    expect([link2.commit_type, link2.message_count]).toEqual(["snapshot", 2]);
    // An append, for contrast: a delta of the one new message on the parent's link.
    const appended = checkpoint({ messages: [m(1), m(3), m(4)] }, { messages: 3 });
    await saver.put(cfg2, appended, meta(2), { messages: 3 });
    const link3 = await linkOf(appended.id);
    expect([link3.commit_type, link3.message_count, link3.parent]).toEqual(["delta", 1, link2.id]);
    const cold = new CtxSaver(c.client, { prefix });
    expect((await cold.getTuple(cfg2))?.checkpoint.channel_values).toEqual({ messages: [m(1), m(3)] });
    expect((await cold.getTuple(cfg))?.checkpoint.channel_values).toEqual({ messages: [m(1), m(2), m(3)] });
    // A serializer of its own (here a subclass) loads a list element by element: the same values.
    const own = new CtxSaver(c.client, { prefix, serde: new (class extends JsonPlusSerializer {})() });
    expect((await own.getTuple(cfg2))?.checkpoint.channel_values).toEqual({ messages: [m(1), m(3)] });
  });

  it("a running graph costs one request per saver call", async () => {
    const c = counted();
    const saver = new CtxSaver(c.client, { prefix });
    const calls: string[] = [];
    for (const method of ["put", "putWrites", "getTuple", "list"] as const) {
      const original = saver[method].bind(saver) as (...args: unknown[]) => unknown;
      (saver as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
        calls.push(method);
        return original(...args);
      };
    }
    const g = new StateGraph(MessagesAnnotation)
      .addNode("bot", (s: typeof MessagesAnnotation.State) => ({
        messages: [new AIMessage({ content: `answer ${s.messages.length}`, id: `a${s.messages.length}` })],
      }))
      .addEdge(START, "bot")
      .addEdge("bot", END)
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: `g-${randomUUID()}` } };
    const turns = 5;
    for (let i = 0; i < turns; i++) {
      await g.invoke({ messages: [new HumanMessage({ content: `question ${i}`, id: `q${i}` })] }, config);
    }
    // Per turn: getTuple, 3 puts (input, after input, after bot), 2 putWrites.
    expect(calls.filter((m) => m === "put")).toHaveLength(3 * turns);
    expect(calls.filter((m) => m === "putWrites")).toHaveLength(2 * turns);
    expect(calls.filter((m) => m === "getTuple")).toHaveLength(turns);
    const sent = c.since(0);
    expect(sent.filter((r) => r === BATCH)).toHaveLength(5 * turns);
    expect(sent.filter((r) => r === READ)).toHaveLength(turns);
    expect(sent).toHaveLength(calls.length);
    const state = await g.getState(config);
    expect((state.values as typeof MessagesAnnotation.State).messages).toHaveLength(2 * turns);

    // A new saver (another process) resuming the thread: its first turn costs the same.
    const r = counted();
    const resumed = new StateGraph(MessagesAnnotation)
      .addNode("bot", () => ({ messages: [new AIMessage({ content: "resumed", id: "resumed" })] }))
      .addEdge(START, "bot")
      .addEdge("bot", END)
      .compile({ checkpointer: new CtxSaver(r.client, { prefix }) });
    await resumed.invoke({ messages: [new HumanMessage({ content: "again", id: "again" })] }, config);
    const first = r.since(0);
    // getTuple's state and the messages' chain (not cached yet), then 3 puts and 2 putWrites.
    expect(first).toEqual([READ, READ, BATCH, BATCH, BATCH, BATCH, BATCH]);
  });

  it("writes that come before their checkpoint's put are kept, and the put takes them over", async () => {
    const c = counted();
    const saver = new CtxSaver(c.client, { prefix });
    const thread = { configurable: { thread_id: `w-${randomUUID()}`, checkpoint_ns: "" } };
    const cp = checkpoint({ topic: "x" }, { topic: 1 });
    const at = { configurable: { ...thread.configurable, checkpoint_id: cp.id } };
    // Before the put: a placeholder, which reads as no checkpoint.
    const [early] = await requests(c, () => saver.putWrites(at, [["topic", "early"]], "task-a"));
    expect(early).toEqual([BATCH]);
    expect(await new CtxSaver(c.client, { prefix }).getTuple(at)).toBeUndefined();
    // The put, by another saver that never saw the placeholder: one 409, then the batch again.
    const other = new CtxSaver(c.client, { prefix });
    const [put] = await requests(c, () => other.put(thread, cp, meta(0), { topic: 1 }));
    expect(put).toEqual([BATCH, READ, BATCH]);
    // While a put is on its way, its writes wait for it (no placeholder, no 409).
    const cp2 = checkpoint({ topic: "y" }, { topic: 2 });
    const at2 = { configurable: { ...thread.configurable, checkpoint_id: cp2.id } };
    const mark = c.mark();
    const putting = other.put(at, cp2, meta(1), { topic: 2 });
    const writing = other.putWrites(at2, [["topic", "z"]], "task-b");
    await Promise.all([putting, writing]);
    expect(c.since(mark)).toEqual([BATCH, BATCH]);

    const fresh = new CtxSaver(c.client, { prefix });
    expect((await fresh.getTuple(at))?.pendingWrites).toEqual([["task-a", "topic", "early"]]);
    const latest = await fresh.getTuple(thread);
    expect(latest?.checkpoint.id).toBe(cp2.id);
    expect(latest?.pendingWrites).toEqual([["task-b", "topic", "z"]]);
  });

  it("a put does not wait for its parent's putWrites, and the writes leave the head on it (ADR 0008 v4)", async () => {
    // Writes held on their way (a batch of tool_call commits), as when
    // LangGraph sends them beside the next put.
    let release: () => void = () => {};
    const released = new Promise<void>((r) => (release = r));
    let held: () => void = () => {};
    const holding = new Promise<void>((r) => (held = r));
    const slow: typeof fetch = async (input, init) => {
      if (typeof init?.body === "string" && init.body.includes('"checkpoint":"tool_call"')) {
        held();
        await released;
      }
      return fetch(input, init);
    };
    const saver = new CtxSaver(client({ fetch: slow }), { prefix });
    const threadId = `w-${randomUUID()}`;
    const thread = { configurable: { thread_id: threadId, checkpoint_ns: "" } };
    const cfg1 = await saver.put(thread, checkpoint({ n: 1 }, { n: 1 }), meta(0), { n: 1 });
    const writes = saver.putWrites(cfg1, [["ch", "late"]], "task-1", "~t");
    await holding;
    const cp2 = checkpoint({ n: 2 }, { n: 2 });
    const put = saver.put(cfg1, cp2, meta(1), { n: 2 });
    const first = await Promise.race([put.then(() => "put"), new Promise((r) => setTimeout(() => r("waited"), 10_000))]);
    release();
    await Promise.all([writes, put]);
    expect(first).toBe("put");
    const fresh = new CtxSaver(new Client(live()), { prefix });
    const latest = await fresh.getTuple(thread);
    expect(latest?.checkpoint.id).toBe(cp2.id);
    expect((await fresh.getTuple(cfg1))?.pendingWrites).toEqual([["task-1", "ch", "late"]]);
  });

  it("parallel tasks' writes to one checkpoint all land", async () => {
    const c = counted();
    const saver = new CtxSaver(c.client, { prefix });
    const thread = { configurable: { thread_id: `p-${randomUUID()}`, checkpoint_ns: "" } };
    const cfg = await saver.put(thread, checkpoint({}, {}), meta(0), {});
    const tasks = Array.from({ length: 8 }, (_, i) => `task-${i}`);
    await Promise.all(tasks.map((t, i) => saver.putWrites(cfg, [["out", i]], t, `~${t}`)));
    const got = await new CtxSaver(c.client, { prefix }).getTuple(cfg);
    expect(got?.pendingWrites).toEqual(tasks.map((t, i) => [t, "out", i]));
    // A retried call adds nothing. After the race the saver may not hold the
    // tip's writes (a write whose 409 named a tip it had not seen): it then
    // sends the write, and a read drops it as a repeat.
    const [racedRetry] = await requests(c, () => saver.putWrites(cfg, [["out", 0]], "task-0", "~task-0"));
    expect(racedRetry.length).toBeLessThanOrEqual(1);
    expect((await new CtxSaver(c.client, { prefix }).getTuple(cfg))?.pendingWrites).toEqual(got?.pendingWrites);
  });
});
