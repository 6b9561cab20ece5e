/**
 * The saver's default serializer: LangGraph.js's `JsonPlusSerializer` that
 * reads back only plain data and an allowlist of types, and refuses
 * anything else with an error (ADR 0008, "Serialization").
 *
 * LangGraph.js's own serializer hands every LangChain record
 * (`{lc: 1, type: "constructor", id: [...]}`) to LangChain's `load`, which
 * constructs whatever class or function of `@langchain/core` the id names
 * with the stored arguments, and keeps a `{lc: 2, type: "constructor"}`
 * record it cannot rebuild as a plain object, silently. Here every record
 * of a blob is checked before anything is revived: a class not allowed is
 * {@link DisallowedTypeError}; LangGraph's own serializer then revives the
 * blob, and a record it left unrebuilt, a blob that is not JSON or not
 * UTF-8, or an encoding other than `json` and `bytes` is
 * {@link CheckpointDecodeError}.
 */

import { JsonPlusSerializer } from "@langchain/langgraph-checkpoint";

/**
 * A type to allow: a constructor of the builtins LangGraph.js stores as
 * `{lc: 2}` records (`Set`, `Map`, `RegExp`, `Uint8Array`, `Error`), or a
 * name as stored: the builtin's name, or a LangChain record's id joined by
 * dots (`"langchain_core.documents.Document"`).
 */
export type AllowedType = string | (abstract new (...args: never[]) => unknown);

/** LangChain's message types, as LangChain.js serializes them. */
const MESSAGES = [
  "HumanMessage",
  "HumanMessageChunk",
  "AIMessage",
  "AIMessageChunk",
  "SystemMessage",
  "SystemMessageChunk",
  "ChatMessage",
  "ChatMessageChunk",
  "ToolMessage",
  "ToolMessageChunk",
  "FunctionMessage",
  "FunctionMessageChunk",
  "RemoveMessage",
].map((name) => `langchain_core.messages.${name}`);

/**
 * What {@link StrictSerializer} reads back beside plain data: LangChain's
 * message types. What LangGraph.js writes into its own checkpoints needs no
 * more: `undefined` and DeltaChannel's snapshots are records of their own
 * that name no class, and sends, interrupts, commands and a task's error
 * (`{message, name}`) are plain objects.
 */
export const DEFAULT_ALLOWED_TYPES: readonly string[] = [...MESSAGES];

/** A checkpoint blob the saver does not read back: it cannot be decoded, or a type it names cannot be rebuilt. */
export class CheckpointDecodeError extends Error {
  override name = "CheckpointDecodeError";
}

/** A checkpoint blob names a type that is not allowed; nothing of it was constructed. */
export class DisallowedTypeError extends CheckpointDecodeError {
  override name = "DisallowedTypeError";

  constructor(readonly typeName: string) {
    super(
      `refused to load ${typeName} from a checkpoint: not an allowed type (plain data, LangChain messages ` +
        "and LangGraph's own types are; allow your own with new CtxSaver(client, { allowedTypes: [...] }))",
    );
  }
}

function typeName(t: AllowedType): string {
  return typeof t === "string" ? t : t.name;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The name a LangChain or LangGraph record gives its type, or undefined for plain data. */
function named(v: Record<string, unknown>): string | undefined {
  if (v.lc !== 1 && v.lc !== 2) return undefined;
  const id = Array.isArray(v.id) ? v.id.map(String).join(".") : JSON.stringify(v.id);
  if (v.lc === 2) return v.type === "constructor" ? id : undefined;
  if (v.type === "constructor") return id;
  if (v.type === "secret") return `secret ${id}`;
  if (v.type === "not_implemented") return `${id} (not serializable)`;
  return undefined;
}

/** A `{lc: 2, type: "constructor"}` record left in a revived value: one LangGraph did not rebuild. */
function unrebuilt(value: unknown, seen = new Set<object>()): string | undefined {
  if (typeof value !== "object" || value === null || seen.has(value)) return undefined;
  seen.add(value);
  if (isRecord(value) && value.lc === 2 && value.type === "constructor") return named(value);
  const inner: Iterable<unknown> =
    value instanceof Map ? [...value.keys(), ...value.values()] : value instanceof Set ? value : Object.values(value);
  for (const v of inner) {
    const found = unrebuilt(v, seen);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * LangGraph.js's `JsonPlusSerializer` (it writes as LangGraph does) that
 * reads back plain data, {@link DEFAULT_ALLOWED_TYPES} and the types it is
 * given, and throws on anything else. It reads `json` and `bytes` blobs.
 */
export class StrictSerializer extends JsonPlusSerializer {
  readonly allowedTypes: ReadonlySet<string>;

  constructor(allowedTypes: Iterable<AllowedType> = []) {
    super();
    this.allowedTypes = new Set([...DEFAULT_ALLOWED_TYPES, ...[...allowedTypes].map(typeName)]);
  }

  /** Throws on the first record of `value` whose type is not allowed. */
  private check(value: Json): void {
    if (Array.isArray(value)) {
      for (const v of value) this.check(v);
    } else if (isRecord(value)) {
      const name = named(value);
      if (name !== undefined && !this.allowedTypes.has(name)) throw new DisallowedTypeError(name);
      for (const v of Object.values(value)) this.check(v);
    }
  }

  override async loadsTyped(type: string, data: Uint8Array | string): Promise<unknown> {
    if (type === "bytes") return super.loadsTyped(type, data);
    if (type !== "json") {
      throw new CheckpointDecodeError(`refused a ${JSON.stringify(type)} blob: the saver reads back json and bytes only`);
    }
    let text: string;
    let parsed: Json;
    try {
      text = typeof data === "string" ? data : new TextDecoder("utf-8", { fatal: true }).decode(data);
      parsed = JSON.parse(text) as Json;
    } catch (e) {
      throw new CheckpointDecodeError(`a checkpoint blob cannot be decoded: ${String(e)}`, { cause: e });
    }
    this.check(parsed);
    let value: unknown;
    try {
      value = await super.loadsTyped("json", text);
    } catch (e) {
      throw new CheckpointDecodeError(`a checkpoint blob cannot be rebuilt: ${String(e)}`, { cause: e });
    }
    const left = unrebuilt(value);
    if (left !== undefined) throw new CheckpointDecodeError(`cannot rebuild ${left} from a checkpoint: its record is not one LangGraph revives`);
    return value;
  }
}
