// The saver's serializer: plain data, LangChain's messages and LangGraph's
// own records are read back; the user's types when allowed; any other class
// a blob names is refused with an error that names it, before LangChain's
// `load` constructs anything; a blob that cannot be decoded is an error
// too, never undefined nor an inert record (ADR 0008, "Serialization").
import { randomUUID } from "node:crypto";

import { Serializable } from "@langchain/core/load/serializable";
import {
  AIMessage,
  AIMessageChunk,
  ChatMessage,
  FunctionMessage,
  HumanMessage,
  HumanMessageChunk,
  RemoveMessage,
  SystemMessage,
  ToolMessage,
} from "@langchain/core/messages";
import { PromptTemplate } from "@langchain/core/prompts";
import { JsonPlusSerializer, emptyCheckpoint, type Checkpoint } from "@langchain/langgraph-checkpoint";
import { DeltaSnapshot } from "@langchain/langgraph-checkpoint";
import { afterEach, describe, expect, it, vi } from "vitest";

import { CheckpointDecodeError, CtxSaver, DisallowedTypeError, StrictSerializer } from "../src/langgraph/index.js";
import { client as liveClient } from "./live.js";

const text = (s: string) => new TextEncoder().encode(s);

/**
 * A blob that has LangChain's `load` construct a class of @langchain/core
 * (any exported class or function) from attacker-chosen arguments: what
 * someone who can write checkpoint bytes would store. A prompt template
 * here; a constructor call is seen by the spy on what every LangChain
 * Serializable's constructor reads.
 */
const CRAFTED = {
  lc: 1,
  type: "constructor",
  id: ["langchain_core", "prompts", "PromptTemplate"],
  kwargs: { template: "{x}", input_variables: ["x"] },
};
const CRAFTED_NAME = "langchain_core.prompts.PromptTemplate";

/** A type of the user's own: a LangChain Serializable, so its records name it (`my_app.notes.Note`). */
class Note extends Serializable {
  override lc_namespace = ["my_app", "notes"];
  override lc_serializable = true;
  readonly text: string;

  constructor(fields: { text: string }) {
    super(fields);
    this.text = fields.text;
  }
}

function constructions() {
  return vi.spyOn(Serializable.prototype, "lc_serializable_keys", "get");
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("StrictSerializer", () => {
  it("the crafted blob constructs a class on LangGraph's own serializer", async () => {
    // The reference: what the tests below refuse really runs code.
    const spy = constructions();
    const value: unknown = await new JsonPlusSerializer().loadsTyped("json", JSON.stringify({ v: CRAFTED }));
    expect((value as { v: unknown }).v).toBeInstanceOf(PromptTemplate);
    expect(spy).toHaveBeenCalled();
  });

  // More of what LangGraph's own serializer constructs from data: a tracer
  // that sends every run to LangSmith (from the environment's key), and a
  // class that is not even Serializable (`load` calls `new` on any export).
  const DANGEROUS: [string[], string][] = [
    [["langchain_core", "tracers", "tracer_langchain", "LangChainTracer"], "LangChainTracer"],
    [["langchain_core", "utils", "async_caller", "AsyncCaller"], "AsyncCaller"],
  ];

  it.each(DANGEROUS)("LangGraph's own serializer constructs %j; refused by name, nothing revived", async (id, cls) => {
    const blob = JSON.stringify({ v: { lc: 1, type: "constructor", id, kwargs: { project_name: "p" } } });
    const value = (await new JsonPlusSerializer().loadsTyped("json", blob)) as { v: object };
    expect(value.v.constructor.name).toBe(cls);
    const revived = vi.spyOn(StrictSerializer.prototype as unknown as { revive: () => unknown }, "revive");
    await expect(new StrictSerializer().loadsTyped("json", blob)).rejects.toThrow(
      expect.objectContaining({ name: "DisallowedTypeError", typeName: id.join(".") }) as Error,
    );
    expect(revived).not.toHaveBeenCalled();
  });

  it("refuses a blob naming a class it does not allow, and constructs nothing", async () => {
    const blobs = [CRAFTED, { a: [1, { b: CRAFTED }] }, [new HumanMessage("hi").toJSON(), CRAFTED]];
    // Inside an allowed message's arguments, the same.
    const inside = { ...(new HumanMessage("x").toJSON() as object), kwargs: { content: [CRAFTED] } };
    const spy = constructions();
    for (const blob of blobs) {
      const err = await new StrictSerializer().loadsTyped("json", JSON.stringify(blob)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DisallowedTypeError);
      expect((err as DisallowedTypeError).typeName).toBe(CRAFTED_NAME);
      expect(String(err)).toContain(CRAFTED_NAME);
    }
    await expect(new StrictSerializer().loadsTyped("json", JSON.stringify(inside))).rejects.toThrow(DisallowedTypeError);
    expect(spy).not.toHaveBeenCalled();
  });

  it("reads back plain data, LangChain's messages and LangGraph's own records", async () => {
    const serde = new StrictSerializer();
    const roundTrip = async (v: unknown) => {
      const [t, d] = await serde.dumpsTyped(v);
      return serde.loadsTyped(t, d);
    };
    const plain = { s: "x", n: 1, b: true, z: null, l: [1, [2, { k: "v" }]], u: undefined };
    expect(await roundTrip(plain)).toEqual(plain);
    expect(await roundTrip(new Uint8Array([1, 2]))).toEqual(new Uint8Array([1, 2]));
    const messages = [
      new HumanMessage({ content: "h", id: "1" }),
      new HumanMessageChunk({ content: "h" }),
      new AIMessage({ content: "a", tool_calls: [{ name: "t", args: { q: 1 }, id: "c1" }] }),
      new AIMessageChunk({ content: "a" }),
      new SystemMessage("s"),
      new ToolMessage({ content: "t", tool_call_id: "c1" }),
      new FunctionMessage({ content: "f", name: "fn" }),
      new ChatMessage({ content: "c", role: "critic" }),
      new RemoveMessage({ id: "1" }),
    ];
    const back = (await roundTrip(messages)) as object[];
    expect(back.map((m) => m.constructor)).toEqual(messages.map((m) => m.constructor));
    expect(back).toEqual(messages);
    const snapshot = (await roundTrip(new DeltaSnapshot([new HumanMessage("h")]))) as DeltaSnapshot<unknown[]>;
    expect(snapshot).toBeInstanceOf(DeltaSnapshot);
    expect(snapshot.value[0]).toBeInstanceOf(HumanMessage);
  });

  it.each([
    [new Set([1]), "Set"],
    [new Map([[1, 2]]), "Map"],
    [/a+/g, "RegExp"],
    [{ nested: new Uint8Array([1]) }, "Uint8Array"],
    [new PromptTemplate({ template: "{x}", inputVariables: ["x"] }), "langchain_core.prompts.prompt.PromptTemplate"],
  ])("refuses %s by name unless allowed", async (value, name) => {
    const [t, d] = await new JsonPlusSerializer().dumpsTyped(value);
    await expect(new StrictSerializer().loadsTyped(t, d)).rejects.toThrow(
      expect.objectContaining({ name: "DisallowedTypeError", typeName: name }) as Error,
    );
    const back: unknown = await new StrictSerializer([name]).loadsTyped(t, d);
    if (value instanceof PromptTemplate) expect(back).toBeInstanceOf(PromptTemplate);
    else expect(back).toEqual(value);
  });

  it("takes the builtins' constructors too", async () => {
    const serde = new StrictSerializer([Set, Map]);
    const [t, d] = await serde.dumpsTyped({ s: new Set([1]), m: new Map([["k", 2]]) });
    expect(await serde.loadsTyped(t, d)).toEqual({ s: new Set([1]), m: new Map([["k", 2]]) });
  });

  it("reads back a type of the user's own, given as its class, and constructs no other", async () => {
    const value = { note: new Note({ text: "n" }), message: new HumanMessage({ content: "h", additional_kwargs: { note: new Note({ text: "m" }) } }) };
    const [t, d] = await new JsonPlusSerializer().dumpsTyped(value);
    // LangGraph's own serializer cannot: LangChain's `load` constructs only its own classes.
    await expect(new JsonPlusSerializer().loadsTyped(t, d)).rejects.toThrow(/Invalid namespace/);
    await expect(new StrictSerializer().loadsTyped(t, d)).rejects.toThrow(
      expect.objectContaining({ name: "DisallowedTypeError", typeName: "my_app.notes.Note" }) as Error,
    );
    const back = (await new StrictSerializer([Note]).loadsTyped(t, d)) as typeof value;
    expect(back.note).toBeInstanceOf(Note);
    expect(back.note.text).toBe("n");
    expect(back.message).toBeInstanceOf(HumanMessage);
    expect(back.message.additional_kwargs.note).toBeInstanceOf(Note);
    // The class is known by its name; whatever namespace a record gives it, only the class given is constructed.
    const elsewhere = { lc: 1, type: "constructor", id: ["langchain_core", "prompts", "Note"], kwargs: { text: "x" } };
    expect(await new StrictSerializer([Note]).loadsTyped("json", JSON.stringify(elsewhere))).toBeInstanceOf(Note);
    // A class that no record names is not a type to allow.
    expect(() => new StrictSerializer([class Plain {}])).toThrow(/Plain/);
  });

  it("refuses an id that only joins to an allowed name", async () => {
    for (const id of [["langchain_core.messages", "HumanMessage"], ["langchain_core", "messages.HumanMessage"], ["langchain_core", "messages", 7]]) {
      const blob = { lc: 1, type: "constructor", id, kwargs: { content: "x" } };
      await expect(new StrictSerializer([Note]).loadsTyped("json", JSON.stringify(blob))).rejects.toThrow(DisallowedTypeError);
    }
  });

  it.each([
    ["json", text("{not json"), "cannot be decoded"],
    ["json", new Uint8Array([0x22, 0xff, 0x22]), "cannot be decoded"],
    ["pickle", text("x"), '"pickle"'],
    ["msgpack", text("x"), '"msgpack"'],
    // Allowed, but not what LangGraph rebuilds: an error, not the record kept inert.
    ["json", text(JSON.stringify({ lc: 2, type: "constructor", id: ["Set"], args: ["no array"] })), "cannot rebuild Set"],
    ["json", text(JSON.stringify({ lc: 2, type: "constructor", id: ["Date"], args: [0] })), "cannot rebuild Date"],
    [
      "json",
      text(JSON.stringify({ lc: 1, type: "constructor", id: ["langchain_core", "messages", "NoSuchMessage"], kwargs: {} })),
      "NoSuchMessage",
    ],
    // An allowed message with no arguments: LangChain's `load` would keep it as a plain object.
    ["json", text(JSON.stringify({ lc: 1, type: "constructor", id: ["langchain_core", "messages", "HumanMessage"] })), "cannot rebuild"],
    ["json", text(JSON.stringify({ lc: 1, type: "secret", id: ["OPENAI_API_KEY"] })), "OPENAI_API_KEY"],
  ])("a %s blob that cannot be read back is an error (%#)", async (type, data, says) => {
    const serde = new StrictSerializer(["Set", "Date", "langchain_core.messages.NoSuchMessage"]);
    const err = await serde.loadsTyped(type, data).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointDecodeError);
    expect(String(err)).toContain(says);
  });
});

// -- on the saver -------------------------------------------------------------

const MARK = "ctx-test: the crafted blob goes here";

/** LangGraph's serializer, but every string MARK is written as `blob`. */
class Crafting extends JsonPlusSerializer {
  constructor(private readonly blob: string) {
    super();
  }

  override async dumpsTyped(obj: unknown): Promise<[string, Uint8Array]> {
    const [t, d] = await super.dumpsTyped(obj);
    if (t !== "json") return [t, d];
    return [t, text(new TextDecoder().decode(d).replaceAll(JSON.stringify(MARK), this.blob))];
  }
}

const WHERE = ["value", "large value", "list element", "write", "metadata"] as const;

/** Puts a checkpoint with MARK in `where`; its config. */
async function crafted(saver: CtxSaver, where: (typeof WHERE)[number]) {
  const values: Record<string, unknown> = {
    value: { small: MARK },
    "large value": { big: "x".repeat(4096), there: MARK },
    "list element": [new HumanMessage("hi"), MARK],
  };
  const cp: Checkpoint = { ...emptyCheckpoint(), channel_values: { v: values[where] ?? 1 }, channel_versions: { v: 1 } };
  const metadata = { source: "loop" as const, step: 0, parents: {}, ...(where === "metadata" ? { note: MARK } : {}) };
  const thread = { configurable: { thread_id: `crafted ${where}`, checkpoint_ns: "" } };
  const conf = await saver.put(thread, cp, metadata, { v: 1 });
  if (where === "write") await saver.putWrites(conf, [["v", MARK]], "task-1");
  return conf;
}

describe("CtxSaver's default serializer", () => {
  it.each(WHERE)("refuses a crafted checkpoint (in a %s) and constructs nothing", async (where) => {
    const prefix = `lgserde-${randomUUID().slice(0, 8)}`;
    const conf = await crafted(new CtxSaver(liveClient(), { prefix, serde: new Crafting(JSON.stringify(CRAFTED)) }), where);
    const saver = new CtxSaver(liveClient(), { prefix }); // the default: a fresh saver loads it
    const spy = constructions();
    const load = async () => {
      if (where === "metadata") {
        for await (const _ of saver.list({ configurable: { thread_id: `crafted ${where}` } }, { filter: { source: "loop" } })) {
          // drain
        }
      } else {
        await saver.getTuple(conf);
      }
    };
    await expect(load()).rejects.toThrow(expect.objectContaining({ name: "DisallowedTypeError", typeName: CRAFTED_NAME }) as Error);
    expect(spy).not.toHaveBeenCalled();
  });

  it("an undecodable checkpoint is an error, not undefined", async () => {
    const prefix = `lgserde-${randomUUID().slice(0, 8)}`;
    const conf = await crafted(new CtxSaver(liveClient(), { prefix, serde: new Crafting("{oops") }), "value");
    await expect(new CtxSaver(liveClient(), { prefix }).getTuple(conf)).rejects.toThrow(CheckpointDecodeError);
  });

  it("reads the types it is given", async () => {
    const prefix = `lgserde-${randomUUID().slice(0, 8)}`;
    const cp: Checkpoint = { ...emptyCheckpoint(), channel_values: { v: { seen: new Set(["a"]) } }, channel_versions: { v: 1 } };
    const conf = await new CtxSaver(liveClient(), { prefix }).put(
      { configurable: { thread_id: "t", checkpoint_ns: "" } },
      cp,
      { source: "loop", step: 0, parents: {} },
      { v: 1 },
    );
    // The value is stored; a saver that does not allow Set refuses it...
    await expect(new CtxSaver(liveClient(), { prefix }).getTuple(conf)).rejects.toThrow(/Set/);
    // ... and one that does reads it back.
    const tuple = await new CtxSaver(liveClient(), { prefix, allowedTypes: [Set] }).getTuple(conf);
    expect(tuple?.checkpoint.channel_values.v).toEqual({ seen: new Set(["a"]) });
    // A class of one's own, the same.
    const noted = await new CtxSaver(liveClient(), { prefix }).put(
      { configurable: { thread_id: "n", checkpoint_ns: "" } },
      { ...cp, channel_values: { v: [new HumanMessage("h"), new Note({ text: "n" })] } },
      { source: "loop", step: 0, parents: {} },
      { v: 1 },
    );
    await expect(new CtxSaver(liveClient(), { prefix }).getTuple(noted)).rejects.toThrow(/my_app\.notes\.Note/);
    const notes = await new CtxSaver(liveClient(), { prefix, allowedTypes: [Note] }).getTuple(noted);
    expect((notes?.checkpoint.channel_values.v as unknown[])[1]).toEqual(new Note({ text: "n" }));
  });

  it("takes allowedTypes only for its own serializer", () => {
    expect(() => new CtxSaver(liveClient(), { serde: new JsonPlusSerializer(), allowedTypes: [Set] })).toThrow(/allowedTypes/);
    const serde = new JsonPlusSerializer();
    expect(new CtxSaver(liveClient(), { serde }).serde).toBe(serde);
    expect(new CtxSaver(liveClient()).serde).toBeInstanceOf(StrictSerializer);
  });
});
