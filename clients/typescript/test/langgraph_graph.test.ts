// A real LangGraph graph (a StateGraph over MessagesAnnotation, so the
// messages channel is add_messages) run with CtxSaver over the live server,
// and the same run with LangGraph's MemorySaver, the reference: both must
// tell the same story through getState, getStateHistory and time travel. A
// second CtxSaver, with nothing cached, must read the same history back.
import { randomUUID } from "node:crypto";

import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph, type StateSnapshot } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { afterAll, describe, expect, it } from "vitest";

import { Client } from "../src/client.js";
import { CtxSaver } from "../src/langgraph/index.js";
import { dropPrefix } from "./langgraph_initializer.mjs";
import { client as liveClient } from "./live.js";

function graph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode("bot", (state: typeof MessagesAnnotation.State) => {
      const last = state.messages[state.messages.length - 1];
      const turns = state.messages.filter((m) => m.getType() === "human").length;
      return { messages: [new AIMessage({ content: `answer ${turns} to: ${last?.text ?? ""}`, id: `ai-${turns}` })] };
    })
    .addEdge(START, "bot")
    .addEdge("bot", END)
    .compile({ checkpointer });
}

/** The messages of a snapshot, as (type, text) pairs. */
function texts(messages: BaseMessage[]): [string, string][] {
  return messages.map((m) => [m.getType(), m.text]);
}

/** What a history entry says, without ids and times (which differ between savers). */
function story(s: StateSnapshot): unknown {
  const values = s.values as typeof MessagesAnnotation.State;
  return {
    messages: texts(values.messages ?? []),
    next: s.next,
    source: s.metadata?.source,
    step: s.metadata?.step,
    hasParent: s.parentConfig !== undefined,
    tasks: s.tasks.map((t) => t.name),
  };
}

function checkpointIdOf(s: StateSnapshot): string | undefined {
  const id: unknown = s.config.configurable?.checkpoint_id;
  return typeof id === "string" ? id : undefined;
}

async function history(g: ReturnType<typeof graph>, config: object): Promise<StateSnapshot[]> {
  const out: StateSnapshot[] = [];
  for await (const s of g.getStateHistory(config)) out.push(s);
  return out;
}

/** Three turns, then time travel from the state after the first turn. */
async function run(checkpointer: BaseCheckpointSaver) {
  const g = graph(checkpointer);
  const config = { configurable: { thread_id: `chat-${randomUUID()}` } };
  for (const q of ["hello", "what is ctx?", "and a checkpoint?"]) {
    await g.invoke({ messages: [new HumanMessage({ content: q, id: `q-${q}` })] }, config);
  }
  const latest = await g.getState(config);
  const past = await history(g, config);
  // The state after turn 1: two messages, nothing left to run.
  const afterFirst = past.find((s) => (s.values as typeof MessagesAnnotation.State).messages.length === 2 && s.next.length === 0);
  if (afterFirst === undefined) throw new Error("no checkpoint after the first turn");
  const forked = await g.invoke({ messages: [new HumanMessage({ content: "a different second question", id: "q-fork" })] }, afterFirst.config);
  const afterFork = await g.getState(config);
  const forkHistory = await history(g, config);
  // The old branch's last checkpoint is still there, by its id.
  const oldTip = await g.getState(latest.config);
  return { g, config, latest, past, afterFirst, forked, afterFork, forkHistory, oldTip };
}

describe("LangGraph graph on CtxSaver, beside MemorySaver", () => {
  const prefix = `lgg-${randomUUID().slice(0, 8)}`;
  const client = liveClient();
  afterAll(async () => {
    await dropPrefix(client, prefix);
  });

  it("tells the same story: state, history, time travel; a cold saver reads it back", async () => {
    const reference = await run(new MemorySaver());
    const ours = await run(new CtxSaver(client, { prefix }));

    // Three turns: six messages, the same as the reference's.
    expect(texts((ours.latest.values as typeof MessagesAnnotation.State).messages)).toEqual([
      ["human", "hello"],
      ["ai", "answer 1 to: hello"],
      ["human", "what is ctx?"],
      ["ai", "answer 2 to: what is ctx?"],
      ["human", "and a checkpoint?"],
      ["ai", "answer 3 to: and a checkpoint?"],
    ]);
    expect(story(ours.latest)).toEqual(story(reference.latest));
    // Three checkpoints a turn (input, after input, after bot), newest first.
    expect(ours.past).toHaveLength(9);
    expect(ours.past.map(story)).toEqual(reference.past.map(story));
    // Each entry's parent is the next (older) entry.
    for (let i = 0; i + 1 < ours.past.length; i++) {
      expect(ours.past[i]?.parentConfig?.configurable?.checkpoint_id).toBe(ours.past[i + 1]?.config.configurable?.checkpoint_id);
    }

    // Time travel: the fork continues from turn 1, not from turn 3.
    expect(texts((ours.afterFork.values as typeof MessagesAnnotation.State).messages)).toEqual([
      ["human", "hello"],
      ["ai", "answer 1 to: hello"],
      ["human", "a different second question"],
      ["ai", "answer 2 to: a different second question"],
    ]);
    expect(story(ours.afterFork)).toEqual(story(reference.afterFork));
    expect(ours.forkHistory.map(story)).toEqual(reference.forkHistory.map(story));
    // The fork's history goes back through the checkpoint it started from.
    const ids = ours.forkHistory.map((s) => checkpointIdOf(s));
    expect(ids).toContain(ours.afterFirst.config.configurable?.checkpoint_id);
    // The abandoned branch's tip still reads as it was.
    expect(story(ours.oldTip)).toEqual(story(ours.latest));

    // A new saver, nothing cached: the same state and the same history.
    const cold = graph(new CtxSaver(new Client({ url: client.url, token: client.token }), { prefix }));
    expect(story(await cold.getState(ours.config))).toEqual(story(ours.afterFork));
    const coldHistory = await history(cold, ours.config);
    expect(coldHistory.map(story)).toEqual(ours.forkHistory.map(story));
    expect(coldHistory.map((s) => checkpointIdOf(s))).toEqual(ids);
    // And the old branch by id.
    expect(story(await cold.getState(ours.latest.config))).toEqual(story(ours.latest));
  });

  it("updateState forks too: the update is a checkpoint whose parent is the state it updated", async () => {
    const saver = new CtxSaver(client, { prefix });
    const g = graph(saver);
    const config = { configurable: { thread_id: `upd-${randomUUID()}` } };
    await g.invoke({ messages: [new HumanMessage({ content: "hi", id: "q1" })] }, config);
    const before = await g.getState(config);
    const updated = await g.updateState(config, { messages: [new AIMessage({ content: "a note", id: "note" })] });
    const after = await g.getState(config);
    expect(after.config.configurable?.checkpoint_id).toBe(updated.configurable?.checkpoint_id);
    expect(after.parentConfig?.configurable?.checkpoint_id).toBe(before.config.configurable?.checkpoint_id);
    expect(after.metadata?.source).toBe("update");
    expect(texts((after.values as typeof MessagesAnnotation.State).messages)).toEqual([
      ["human", "hi"],
      ["ai", "answer 1 to: hi"],
      ["ai", "a note"],
    ]);
  });
});

describe("a graph with a subgraph on CtxSaver, beside MemorySaver", () => {
  const prefix = `lgs-${randomUUID().slice(0, 8)}`;
  const client = liveClient();
  afterAll(async () => {
    await dropPrefix(client, prefix);
  });

  // The parent's `inner` node is a compiled graph with an interrupt before
  // its `answer` node: its checkpoints live in the namespace `inner:<task id>`.
  function nested(checkpointer: BaseCheckpointSaver) {
    const inner = new StateGraph(MessagesAnnotation)
      .addNode("think", () => ({ messages: [new AIMessage({ content: "thinking", id: "think" })] }))
      .addNode("answer", () => ({ messages: [new AIMessage({ content: "done", id: "answer" })] }))
      .addEdge(START, "think")
      .addEdge("think", "answer")
      .addEdge("answer", END)
      .compile({ interruptBefore: ["answer"] });
    return new StateGraph(MessagesAnnotation).addNode("inner", inner).addEdge(START, "inner").addEdge("inner", END).compile({ checkpointer });
  }

  async function runNested(checkpointer: BaseCheckpointSaver) {
    const g = nested(checkpointer);
    const config = { configurable: { thread_id: `sub-${randomUUID()}` } };
    await g.invoke({ messages: [new HumanMessage({ content: "go", id: "go" })] }, config);
    const paused = await g.getState(config, { subgraphs: true });
    const sub = paused.tasks[0]?.state as StateSnapshot | undefined;
    const subHistory: StateSnapshot[] = [];
    // The subgraph's namespace, all of it (its config names one checkpoint).
    const ns = { configurable: { thread_id: config.configurable.thread_id, checkpoint_ns: sub?.config.configurable?.checkpoint_ns as string } };
    if (sub) for await (const s of g.getStateHistory(ns)) subHistory.push(s);
    await g.invoke(null, config);
    const done = await g.getState(config);
    return { paused, sub, subHistory, done };
  }

  it("pauses inside the subgraph and resumes, as with MemorySaver", async () => {
    const reference = await runNested(new MemorySaver());
    const ours = await runNested(new CtxSaver(client, { prefix }));
    expect(ours.paused.next).toEqual(["inner"]);
    expect(reference.paused.next).toEqual(["inner"]);
    expect(ours.sub).toBeDefined();
    expect(String(ours.sub?.config.configurable?.checkpoint_ns)).toMatch(/^inner:/);
    expect(story(ours.sub as StateSnapshot)).toEqual(story(reference.sub as StateSnapshot));
    expect(ours.subHistory.length).toBeGreaterThanOrEqual(2);
    expect(ours.subHistory.map(story)).toEqual(reference.subHistory.map(story));
    expect(texts((ours.done.values as typeof MessagesAnnotation.State).messages)).toEqual([
      ["human", "go"],
      ["ai", "thinking"],
      ["ai", "done"],
    ]);
    expect(story(ours.done)).toEqual(story(reference.done));
  });
});
