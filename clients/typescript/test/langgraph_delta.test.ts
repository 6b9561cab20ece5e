// A graph whose messages channel is LangGraph's DeltaChannel (beta: only
// per-step writes are stored, with a snapshot every 50 updates here, so the walk goes back to the root; the state is
// rebuilt by the saver's getDeltaChannelHistory walk), run with CtxSaver and
// with MemorySaver, the reference: the same states and history, read back by
// a cold saver too; and the requests a warm state load costs.
import { randomUUID } from "node:crypto";

import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { Annotation, DeltaChannel, END, MemorySaver, START, StateGraph, messagesDeltaReducer, type StateSnapshot } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { afterAll, describe, expect, it } from "vitest";

import { CtxSaver } from "../src/langgraph/index.js";
import { counted } from "./counting.js";
import { dropPrefix } from "./langgraph_initializer.mjs";
import { client as liveClient } from "./live.js";

const State = Annotation.Root({
  messages: new DeltaChannel<BaseMessage[], BaseMessage[]>(messagesDeltaReducer, { snapshotFrequency: 50 }),
});

function graph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(State)
    .addNode("bot", (state: typeof State.State) => ({
      messages: [new AIMessage({ content: `answer ${state.messages.length}`, id: `a-${state.messages.length}` })],
    }))
    .addEdge(START, "bot")
    .addEdge("bot", END)
    .compile({ checkpointer });
}

function texts(s: StateSnapshot): string[] {
  return ((s.values as typeof State.State).messages ?? []).map((m) => `${m.getType()}: ${m.text}`);
}

async function chat(saver: BaseCheckpointSaver, thread: string, turns: number) {
  const g = graph(saver);
  const config = { configurable: { thread_id: thread } };
  for (let i = 0; i < turns; i++) {
    await g.invoke({ messages: [new HumanMessage({ content: `question ${i}`, id: `q-${i}` })] }, config);
  }
  const history: StateSnapshot[] = [];
  for await (const s of g.getStateHistory(config)) history.push(s);
  return { g, config, latest: await g.getState(config), history };
}

describe("DeltaChannel on CtxSaver, beside MemorySaver", () => {
  const prefix = `lgd-${randomUUID().slice(0, 8)}`;
  afterAll(async () => {
    await dropPrefix(liveClient(), prefix);
  });

  it("rebuilds the same states; a warm load reads the start and its 4 nearest ancestors", async () => {
    const turns = 7;
    const reference = await chat(new MemorySaver(), "ref", turns);
    const c = counted();
    const ours = await chat(new CtxSaver(c.client, { prefix }), `d-${randomUUID()}`, turns);
    expect(texts(ours.latest)).toHaveLength(2 * turns);
    expect(texts(ours.latest)).toEqual(texts(reference.latest));
    expect(ours.history.map(texts)).toEqual(reference.history.map(texts));
    expect(ours.history.map((s) => s.metadata?.step)).toEqual(reference.history.map((s) => s.metadata?.step));

    // Warm: getTuple, then the start's 4 nearest ancestors by ref (the start
    // itself is the state getTuple just read).
    const warm = await c.sent(() => ours.g.getState(ours.config));
    expect(warm).toEqual(["read", "read", "read", "read", "read"]);

    // Cold: a new saver rebuilds the same states from the server alone.
    const cold = await chat(new CtxSaver(liveClient(), { prefix }), String(ours.config.configurable.thread_id), 0);
    expect(texts(cold.latest)).toEqual(texts(ours.latest));
    expect(cold.history.map(texts)).toEqual(ours.history.map(texts));
  });
});
