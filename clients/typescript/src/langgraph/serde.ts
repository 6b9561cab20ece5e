/**
 * The saver's default serializer: LangGraph.js's `JsonPlusSerializer` that
 * reads back only plain data and an allowlist of types, and refuses
 * anything else with an error (ADR 0008, "Serialization").
 *
 * LangGraph.js's own serializer hands every LangChain record
 * (`{lc: 1, type: "constructor", id: [...]}`) to LangChain's `load`, which
 * constructs whatever class of `@langchain/core` the id names with the
 * stored arguments, and keeps a `{lc: 2, type: "constructor"}` record it
 * cannot rebuild as a plain object, silently. Here every record of a blob
 * is checked before anything is revived: a type not allowed is
 * {@link DisallowedTypeError}. The blob is then revived as LangGraph.js
 * revives it (innermost first; the same closed set of builtins), with the
 * user's own classes given to `load` as the only ones their records can
 * construct; a record that cannot be rebuilt, a blob that is not JSON or
 * not UTF-8, or an encoding other than `json` and `bytes` is
 * {@link CheckpointDecodeError}.
 */

import { load } from "@langchain/core/load";
import { Serializable, get_lc_unique_name } from "@langchain/core/load/serializable";
import { DeltaSnapshot, JsonPlusSerializer } from "@langchain/langgraph-checkpoint";

/**
 * A type to allow: a LangChain `Serializable` class of one's own (its
 * records are known by its name, the last element of their id, and only
 * this class is constructed from them), a constructor of the builtins
 * LangGraph.js stores as `{lc: 2}` records (`Set`, `Map`, `RegExp`,
 * `Uint8Array`, `Error`), or a name as stored: the builtin's name, or a
 * LangChain record's id joined by dots (`"langchain_core.prompts.prompt.PromptTemplate"`),
 * constructed by LangChain's `load` from `@langchain/core`.
 */
export type AllowedType = string | (abstract new (...args: never[]) => unknown);

/** The builtins LangGraph.js writes as `{lc: 2, type: "constructor"}` records and rebuilds. */
const BUILTINS = ["Set", "Map", "RegExp", "Error", "Uint8Array"];

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

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

type Record_ = Record<string, unknown>;

function isRecord(v: unknown): v is Record_ {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const SEGMENT = /^[A-Za-z_$][\w$]*$/;

/** A record's id as a name: its segments joined by dots, or as stored when they are not all names. */
function idName(id: unknown): { name: string; segments?: string[] } {
  if (Array.isArray(id) && id.length > 0 && id.every((s): s is string => typeof s === "string" && SEGMENT.test(s))) {
    return { name: id.join("."), segments: id };
  }
  return { name: JSON.stringify(id) ?? String(id) };
}

/** The name a LangChain or LangGraph record gives its type, or undefined for plain data and LangGraph's own records. */
function named(v: Record_): { name: string; segments?: string[]; constructs: boolean } | undefined {
  if (v.lc === 1 && v.type === "constructor") return { ...idName(v.id), constructs: true };
  if (v.lc === 2 && v.type === "constructor") return { ...idName(v.id), constructs: true };
  if (v.lc === 1 && v.type === "secret") return { name: `secret ${idName(v.id).name}`, constructs: false };
  if (v.lc === 1 && v.type === "not_implemented") return { name: `${idName(v.id).name} (not serializable)`, constructs: false };
  return undefined;
}

/** LangGraph.js's builtins, rebuilt as its serializer rebuilds them; undefined for a record it would keep inert. */
function rebuildBuiltin(record: Record_): unknown {
  const { id, method, args } = record;
  const only = (name: string) => Array.isArray(id) && id.length === 1 && id[0] === name;
  const noMethod = method === undefined || method === null;
  const oneArray = Array.isArray(args) && args.length === 1 && Array.isArray(args[0]);
  if (only("Set") && noMethod && oneArray) return new Set(args[0] as unknown[]);
  if (only("Map") && noMethod && oneArray && (args[0] as unknown[]).every((e) => Array.isArray(e) && e.length === 2)) {
    return new Map(args[0] as [unknown, unknown][]);
  }
  if (only("RegExp") && noMethod && Array.isArray(args) && args.length === 2 && typeof args[0] === "string" && typeof args[1] === "string") {
    try {
      return new RegExp(args[0], args[1]);
    } catch {
      return undefined;
    }
  }
  if (only("Error") && noMethod && Array.isArray(args) && args.length === 1 && typeof args[0] === "string") return new Error(args[0]);
  if (only("Uint8Array") && (noMethod || method === "from") && oneArray) {
    const bytes = args[0] as unknown[];
    if (bytes.every((b) => typeof b === "number" && Number.isInteger(b) && b >= 0 && b <= 255)) return new Uint8Array(bytes as number[]);
  }
  return undefined;
}

/** `load`'s `optionalImportsMap`: the modules a blob's records of the user's classes name, each holding only those classes. */
type Imports = Record<string, Record<string, unknown>>;

/**
 * LangGraph.js's `JsonPlusSerializer` (it writes as LangGraph does) that
 * reads back plain data, {@link DEFAULT_ALLOWED_TYPES} and the types it is
 * given, and throws on anything else. It reads `json` and `bytes` blobs.
 */
export class StrictSerializer extends JsonPlusSerializer {
  /** The names allowed: LangChain ids joined by dots, and builtins. */
  readonly allowedTypes: ReadonlySet<string>;
  /** The user's own classes, by their LangChain name. */
  private readonly classes: ReadonlyMap<string, typeof Serializable>;

  /**
   * @throws TypeError for a class that is neither a LangChain `Serializable`
   *   nor one of the builtins: no record names it (its instances are
   *   stored, and read back, as plain objects).
   */
  constructor(allowedTypes: Iterable<AllowedType> = []) {
    super();
    const names = new Set(DEFAULT_ALLOWED_TYPES);
    const classes = new Map<string, typeof Serializable>();
    for (const t of allowedTypes) {
      if (typeof t === "string") names.add(t);
      else if (t.prototype instanceof Serializable) {
        const cls = t as unknown as typeof Serializable;
        classes.set(get_lc_unique_name(cls), cls);
      } else if (BUILTINS.some((b) => (globalThis as Record_)[b] === t)) names.add(t.name);
      else {
        throw new TypeError(
          `${t.name} is neither a LangChain Serializable nor one of ${BUILTINS.join(", ")}: ` +
            "no checkpoint record names it, its instances are read back as plain objects",
        );
      }
    }
    this.allowedTypes = names;
    this.classes = classes;
  }

  /** Throws on the first record of `value` whose type is not allowed; the user's classes its records name. */
  private check(value: Json, imports: Imports): void {
    if (Array.isArray(value)) {
      for (const v of value) this.check(v, imports);
    } else if (isRecord(value)) {
      const found = named(value);
      if (found !== undefined && !this.allowedTypes.has(found.name)) {
        // A LangChain record of one of the user's classes: `load` finds
        // the class under the module the record names, and nothing else there.
        const segments = value.lc === 1 && found.constructs ? (found.segments ?? []) : [];
        const last = segments.at(-1);
        const cls = last === undefined ? undefined : this.classes.get(last);
        if (last === undefined || cls === undefined) throw new DisallowedTypeError(found.name);
        const module = segments.slice(0, -1).join("/");
        imports[module] = { ...imports[module], [last]: cls };
      }
      for (const v of Object.values(value)) this.check(v, imports);
    }
  }

  /** The checked value revived as LangGraph.js revives it: innermost first. */
  private async revive(value: Json, imports: Imports): Promise<unknown> {
    if (Array.isArray(value)) return Promise.all(value.map((v) => this.revive(v, imports)));
    if (!isRecord(value)) return value;
    const obj: Record_ = {};
    for (const [k, v] of Object.entries(value)) obj[k] = await this.revive(v, imports);
    if (obj.lc === 2 && obj.type === "undefined") return undefined;
    if (obj.lc === 2 && obj.type === "delta_snapshot" && Object.hasOwn(obj, "value")) return new DeltaSnapshot(obj.value);
    if (obj.lc === 2 && obj.type === "constructor") {
      const built = rebuildBuiltin(obj);
      if (built === undefined) throw new CheckpointDecodeError(`cannot rebuild ${idName(obj.id).name} from a checkpoint: its record is not one LangGraph revives`);
      return built;
    }
    if (obj.lc === 1 && obj.type === "constructor") {
      const built: unknown = await load(JSON.stringify(obj), { optionalImportsMap: imports });
      // `load` keeps a record without arguments as a plain object.
      if (isRecord(built) && built.lc === 1 && built.type === "constructor") {
        throw new CheckpointDecodeError(`cannot rebuild ${idName(obj.id).name} from a checkpoint: its record has no kwargs`);
      }
      return built;
    }
    return obj;
  }

  override async loadsTyped(type: string, data: Uint8Array | string): Promise<unknown> {
    if (type === "bytes") return super.loadsTyped(type, data);
    if (type !== "json") {
      throw new CheckpointDecodeError(`refused a ${JSON.stringify(type)} blob: the saver reads back json and bytes only`);
    }
    let parsed: Json;
    try {
      const text = typeof data === "string" ? data : new TextDecoder("utf-8", { fatal: true }).decode(data);
      parsed = JSON.parse(text) as Json;
    } catch (e) {
      throw new CheckpointDecodeError(`a checkpoint blob cannot be decoded: ${String(e)}`, { cause: e });
    }
    const imports: Imports = {};
    this.check(parsed, imports);
    try {
      return await this.revive(parsed, imports);
    } catch (e) {
      if (e instanceof CheckpointDecodeError) throw e;
      throw new CheckpointDecodeError(`a checkpoint blob cannot be rebuilt: ${String(e)}`, { cause: e });
    }
  }
}
