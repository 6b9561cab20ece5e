/**
 * `CtxSaver`: a LangGraph.js checkpointer storing checkpoints in ctx.
 *
 * The mapping is ADR 0008's (the Python saver's): a checkpoint is a
 * `snapshot` commit whose artifact is a one-line JSON document, its ctx
 * parent the parent checkpoint's tip; small values live in the document,
 * large ones are artifacts; a growing list (`messages`) is a chain of link
 * commits holding only the new elements; `putWrites` commits its writes as a
 * `delta` on the checkpoint's tip; refs `{prefix}/t/{thread}/{ns}/c/{hh}/{id}`
 * and `{prefix}/t/{thread}/{ns}/head` make checkpoints visible. A put is one
 * `POST /v1/batch` on a running graph, a putWrites one, a warm getTuple one
 * `POST /v1/read`.
 */

import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  JsonPlusSerializer,
  TASKS,
  WRITES_IDX_MAP,
  getCheckpointId,
  maxChannelVersion,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type DeltaChannelHistory,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";

import { artifactRefOf } from "../client.js";
import { CtxError } from "../errors.js";
import { Api, type BatchArtifact, type BatchCommit, type ReadAnswer } from "./api.js";
import { Cache } from "./cache.js";
import {
  DOC_VERSION,
  INLINE,
  INLINE_VALUE_BYTES,
  LIST_KIND,
  PARENT_LINK,
  TEMPLATE,
  b64,
  createdAt,
  decodeRecords,
  docLine,
  encodeRecords,
  freshWrites,
  merged,
  resolved,
  sameBytes,
  sortedWrites,
  stateOf,
  unb64,
  writeLines,
  type CheckpointDoc,
  type Element,
  type ValueEntry,
  type WriteEntry,
} from "./document.js";
import { Names, parseThreadRef, unescapeSegment } from "./names.js";
import { StrictSerializer, type AllowedType } from "./serde.js";

/** The most bytes of list records a put sends inside its batch. */
const BATCH_VALUE_BYTES = 1024 * 1024;
/** Checkpoints whose states `list` reads concurrently. */
const LIST_BATCH = 16;
/** Refs a listing answers at most (the server's limit). */
/** How long an operation waits for the ones of this saver it follows. */
const WAIT_MS = 30_000;
/** How many of the nearest ancestors DeltaChannel's walk reads by ref. */
const VERIFY_NEAREST = 4;
/** Compare-and-swap attempts before giving up. */
const ATTEMPTS = 50;

/** Options of {@link CtxSaver}. */
export interface CtxSaverOptions {
  /**
   * The serializer; by default a {@link StrictSerializer}, which reads back
   * plain data, LangChain's messages, LangGraph's own records and
   * `allowedTypes`, and throws on any other type a stored blob names.
   */
  serde?: SerializerProtocol;
  /** Types the default serializer reads back beside those (e.g. `[Set, Map]`). */
  allowedTypes?: Iterable<AllowedType>;
  /** The first segment(s) of every ref the saver writes (default `lg`). */
  prefix?: string;
  /** The principal of the commits (default `langgraph`). */
  principal?: string;
  /** Bytes of documents, values and list links kept in memory (default 64 MiB). */
  cacheBytes?: number;
  /** Store list values as chains of link commits (default true). */
  listDeltas?: boolean;
}

/** A list value's new link, to commit. */
interface NewLink {
  parent: string | null;
  commitType: "delta" | "snapshot";
  records: Uint8Array;
  count: number;
  elements: Element[];
}

/** A checkpoint found by listing its ref. */
interface Found {
  threadId: string;
  ns: string;
  checkpointId: string;
  tip: string;
}

/**
 * A ref move of a batch: the ref, where the saver expects it, and what the
 * server does when it is elsewhere (`conflict`: refuse the batch; `skip`:
 * leave it; `overwrite`: move it anyway).
 */
type Move = [name: string, expected: string | null, onStale: "conflict" | "skip" | "overwrite"];

/** JSON texts as the bytes of one JSON array of them. */
function joinJson(texts: Uint8Array[]): Uint8Array {
  const size = 2 + texts.reduce((n, t) => n + t.length, 0) + Math.max(texts.length - 1, 0);
  const out = new Uint8Array(size);
  out[0] = 0x5b; // [
  let at = 1;
  texts.forEach((t, i) => {
    if (i > 0) out[at++] = 0x2c; // ,
    out.set(t, at);
    at += t.length;
  });
  out[at] = 0x5d; // ]
  return out;
}

/** An artifact's bytes as a batch carries them: UTF-8 text, else base64. */
function artifactBody(data: Uint8Array): { text: string } | { base64: string } {
  try {
    return { text: new TextDecoder("utf-8", { fatal: true }).decode(data) };
  } catch {
    return { base64: b64(data) };
  }
}

function conflictIndex(e: unknown): number | undefined {
  if (!(e instanceof CtxError) || e.kind !== "conflict") return undefined;
  const m = /^refs\[(\d+)\]\.expected$/.exec(e.field ?? "");
  return m ? Number(m[1]) : undefined;
}

/** The ref move a batch's 409 names and where that ref is now; anything else is thrown again. */
function lostMove(e: unknown, moves: Move[]): { k: number; name: string; current: string | null } {
  const k = conflictIndex(e);
  const move = k === undefined ? undefined : moves[k];
  if (k === undefined || move === undefined) throw e;
  return { k, name: move[0], current: (e as CtxError).current ?? null };
}

function isNotFound(e: unknown): boolean {
  return e instanceof CtxError && e.kind === "not_found";
}

/** A thread id as a commit's `thread_id` may hold it (1–256 bytes, no control characters). */
function commitThreadId(threadId: string): string | null {
  const n = Buffer.byteLength(threadId, "utf8");
  // eslint-disable-next-line no-control-regex
  return n >= 1 && n <= 256 && !/[\x00-\x08\x0b-\x1f\x7f-\x9f]/.test(threadId) ? threadId : null;
}

function requireConfigurable(config: RunnableConfig, what: string): Record<string, unknown> {
  const conf = config.configurable;
  if (conf === undefined || conf === null) {
    throw new Error(`${what}: the config has no "configurable" (it needs a thread_id)`);
  }
  return conf as Record<string, unknown>;
}

function requireThreadId(conf: Record<string, unknown>, what: string): string {
  const t = conf.thread_id;
  if (typeof t !== "string" && typeof t !== "number") {
    throw new Error(`${what}: the config's configurable has no thread_id`);
  }
  return String(t);
}

function checkpointConfig(threadId: string, ns: string, checkpointId: string): RunnableConfig {
  return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpointId } };
}

/**
 * A LangGraph checkpointer storing checkpoints in ctx (ADR 0008).
 *
 * ```ts
 * const saver = new CtxSaver(new Client({ url, token }));
 * const graph = builder.compile({ checkpointer: saver });
 * ```
 */
export class CtxSaver extends BaseCheckpointSaver {
  readonly names: Names;
  readonly principal: string;
  private readonly api: Api;
  private readonly listDeltas: boolean;
  private readonly docs: Cache<CheckpointDoc>;
  private readonly blobs: Cache<Uint8Array>;
  private readonly links: Cache<Element[]>;
  /** Where this saver last saw each ref: the first guess of a compare-and-swap. */
  private readonly tips = new Map<string, string | null>();
  /** The parent of each commit this saver made (for {@link saw}). */
  private readonly parentOf = new Map<string, string>();
  /** Puts and putWrites in flight, by their checkpoint's ref. */
  private readonly putting = new Map<string, Set<Promise<void>>>();
  private readonly writing = new Map<string, Set<Promise<void>>>();

  constructor(client: ConstructorParameters<typeof Api>[0], options: CtxSaverOptions = {}) {
    const allowedTypes = [...(options.allowedTypes ?? [])];
    if (options.serde !== undefined && allowedTypes.length > 0) {
      throw new Error("allowedTypes extends the saver's own serializer; with serde, allow types in that serializer");
    }
    super(options.serde ?? new StrictSerializer(allowedTypes));
    this.api = new Api(client);
    this.names = new Names(options.prefix ?? "lg");
    this.principal = options.principal ?? "langgraph";
    this.listDeltas = options.listDeltas ?? true;
    const cacheBytes = options.cacheBytes ?? 64 * 1024 * 1024;
    this.docs = new Cache(cacheBytes / 4);
    this.blobs = new Cache(cacheBytes);
    this.links = new Cache(cacheBytes);
  }

  // -- refs -----------------------------------------------------------------

  /**
   * Records where `name` points. An answer that arrives late (a 409 of a
   * request sent before this saver's own write to the ref landed) can name
   * an ancestor of what the saver already saw: that one is kept.
   */
  private saw(name: string, target: string | null | undefined): void {
    if (this.tips.size > 100_000) this.tips.clear();
    const known = this.tips.get(name);
    if (target && known && this.descends(known, target)) return;
    this.tips.set(name, target ?? null);
  }

  /** Whether `commit` is a strict descendant of `ancestor` by the commits this saver made. */
  private descends(commit: string, ancestor: string): boolean {
    let at: string | undefined = commit;
    for (let i = 0; i < 64 && at !== undefined; i++) {
      at = this.parentOf.get(at);
      if (at === ancestor) return true;
    }
    return false;
  }

  private async getRef(name: string): Promise<string | null> {
    const target = await this.api.getRef(name);
    this.saw(name, target);
    return target;
  }

  /** Where the ref pointed when this saver last saw it (read if never). */
  private async knownRef(name: string): Promise<string | null> {
    const t = this.tips.get(name);
    if (t !== undefined) return t;
    return this.getRef(name);
  }

  /** Every ref under `prefix`, a page at a time. */
  private async listRefs(prefix: string): Promise<{ name: string; target: string }[]> {
    return this.api.listRefs(prefix);
  }

  // -- in-flight operations ---------------------------------------------------

  /**
   * Records an operation on `name` in `table`, with the operations in flight
   * it follows (each `[table, name]` of `after`), taken in the same step: an
   * operation waits only for ones recorded before it.
   */
  private begin(
    table: Map<string, Set<Promise<void>>>,
    name: string,
    after: [Map<string, Set<Promise<void>>>, string][],
  ): { end: () => void; before: Promise<void>[] } {
    const before = after.flatMap(([t, n]) => [...(t.get(n) ?? [])]);
    let resolve!: () => void;
    const mine = new Promise<void>((r) => (resolve = r));
    let set = table.get(name);
    if (!set) table.set(name, (set = new Set()));
    set.add(mine);
    const end = () => {
      const left = table.get(name);
      if (left) {
        left.delete(mine);
        if (left.size === 0) table.delete(name);
      }
      resolve();
    };
    return { end, before };
  }

  private static async wait(before: Promise<void>[]): Promise<void> {
    if (before.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((r) => {
      timer = setTimeout(r, WAIT_MS);
      timer.unref();
    });
    await Promise.race([Promise.allSettled(before), late]);
    clearTimeout(timer);
  }

  // -- documents and values -----------------------------------------------------

  /** The checkpoint state at a commit: its document and the writes after it. */
  private async doc(commitId: string): Promise<CheckpointDoc> {
    const hit = this.docs.get(commitId);
    if (hit) return hit;
    return this.docOf(await this.api.readState({ commit: commitId }));
  }

  /** The state a state read answered, cached by its commit. */
  private docOf(read: ReadAnswer): CheckpointDoc {
    const doc = stateOf(new TextDecoder().decode(read.bytes), read.parent);
    this.docs.put(read.commit, doc, read.bytes.length);
    return doc;
  }

  /** Several states, the missing ones read concurrently. */
  private async docsOf(commitIds: string[]): Promise<CheckpointDoc[]> {
    const missing = [...new Set(commitIds)].filter((c) => !this.docs.get(c));
    const read = new Map<string, CheckpointDoc>();
    await Promise.all(
      missing.map(async (c) => {
        read.set(c, this.docOf(await this.api.readState({ commit: c })));
      }),
    );
    return Promise.all(commitIds.map(async (c) => read.get(c) ?? (await this.doc(c))));
  }

  /** The serialized elements of a list value stored as a chain of links. */
  private async linkElements(commitId: string): Promise<Element[]> {
    const hit = this.links.get(commitId);
    if (hit) return hit;
    const read = await this.api.read({ commit: commitId });
    const elements = decodeRecords(read.bytes);
    this.links.put(commitId, elements, read.bytes.length);
    return elements;
  }

  private linked(commitId: string, link: NewLink): void {
    const size = link.elements.reduce((n, [t, d]) => n + t.length + d.length, 0);
    this.links.put(commitId, link.elements, size);
  }

  /**
   * A list value as a chain link: the parent's link when the list is the
   * same; else a new link: a delta of the new elements on the parent's link
   * when the parent's list is a prefix of this one (an append, as
   * add_messages does), a snapshot of every element otherwise.
   */
  private async listLink(value: unknown[], old: ValueEntry | undefined): Promise<string | NewLink> {
    const elements: Element[] = await Promise.all(value.map((e) => this.serde.dumpsTyped(e)));
    let parent: string | null = null;
    let fresh = elements;
    let commitType: NewLink["commitType"] = "snapshot";
    if (old !== undefined && old[0] === LIST_KIND && old[1]) {
      const before = await this.linkElements(old[1]);
      const prefix =
        before.length <= elements.length &&
        before.every(([t, d], i) => {
          const e = elements[i];
          return e !== undefined && t === e[0] && sameBytes(d, e[1]);
        });
      if (prefix) {
        if (before.length === elements.length) return old[1];
        parent = old[1];
        fresh = elements.slice(before.length);
        commitType = "delta";
      }
    }
    return { parent, commitType, records: encodeRecords(fresh), count: fresh.length, elements };
  }

  private linkCommit(threadId: string, link: NewLink): BatchCommit {
    return {
      principal: this.principal,
      template: TEMPLATE,
      format: "raw",
      delta_base64: b64(link.records),
      parent: link.parent,
      commit_type: link.commitType,
      checkpoint: "explicit",
      thread_id: commitThreadId(threadId),
      message_count: link.count,
      created_at: new Date().toISOString(),
    };
  }

  /** One channel value of a document: inline, an artifact or a list's link chain. */
  private async loadValue([typ, ref]: ValueEntry): Promise<unknown> {
    if (typ === LIST_KIND) {
      const elements = await this.linkElements(ref);
      const proto: unknown = Object.getPrototypeOf(this.serde);
      if ((proto === JsonPlusSerializer.prototype || proto === StrictSerializer.prototype) && elements.every(([t]) => t === "json")) {
        // LangGraph's own serializer and the strict one (not a subclass,
        // which may load otherwise) revive an array element by element: the
        // elements joined as one JSON array load in one call, not one each.
        return this.serde.loadsTyped("json", joinJson(elements.map(([, d]) => d)));
      }
      return Promise.all(elements.map(([t, d]) => this.serde.loadsTyped(t, d)));
    }
    if (ref.startsWith(INLINE)) return this.serde.loadsTyped(typ, unb64(ref.slice(INLINE.length)));
    let data = ref ? this.blobs.get(ref) : new Uint8Array();
    if (data === undefined) {
      data = await this.api.downloadArtifact(ref);
      this.blobs.put(ref, data, data.length);
    }
    return this.serde.loadsTyped(typ, data);
  }

  /** The channel values of a document, the uncached ones fetched concurrently. */
  private async values(doc: CheckpointDoc): Promise<Record<string, unknown>> {
    const entries = Object.entries(doc.values ?? {});
    const out: Record<string, unknown> = {};
    await Promise.all(
      entries.map(async ([ch, entry]) => {
        out[ch] = await this.loadValue(entry);
      }),
    );
    // The document's channel order, not the order the reads finished in.
    return Object.fromEntries(entries.filter(([ch]) => ch in out).map(([ch]) => [ch, out[ch]]));
  }

  private async tupleOf(
    threadId: string,
    ns: string,
    doc: CheckpointDoc,
  ): Promise<CheckpointTuple> {
    if (!doc.checkpoint || !doc.metadata) {
      throw new Error(`checkpoint ${doc.id}: its document has no checkpoint or metadata`);
    }
    const [checkpoint, metadata, values, pendingWrites] = await Promise.all([
      this.serde.loadsTyped(doc.checkpoint[0], unb64(doc.checkpoint[1])) as Promise<Checkpoint>,
      this.serde.loadsTyped(doc.metadata[0], unb64(doc.metadata[1])) as Promise<CheckpointMetadata>,
      this.values(doc),
      this.pendingWrites(doc.writes),
    ]);
    const full: Checkpoint = { ...checkpoint, channel_values: values };
    if (full.v < 4 && doc.parent) await this.migratePendingSends(full, threadId, ns, doc.parent);
    const tuple: CheckpointTuple = {
      config: checkpointConfig(threadId, ns, doc.id),
      checkpoint: full,
      metadata,
      pendingWrites,
    };
    if (doc.parent) tuple.parentConfig = checkpointConfig(threadId, ns, doc.parent);
    return tuple;
  }

  private pendingWrites(writes: WriteEntry[]): Promise<CheckpointPendingWrite[]> {
    return Promise.all(
      sortedWrites(writes).map(
        async ([taskId, , channel, typ, data]) =>
          [taskId, channel, await this.serde.loadsTyped(typ, unb64(data))] as CheckpointPendingWrite,
      ),
    );
  }

  /**
   * A checkpoint of format v < 4 takes the sends its parent's tasks wrote
   * (TASKS) as its TASKS channel, as LangGraph's own savers do.
   */
  private async migratePendingSends(
    checkpoint: Checkpoint,
    threadId: string,
    ns: string,
    parentId: string,
  ): Promise<void> {
    const tip = await this.getRef(this.names.checkpoint(threadId, ns, parentId));
    const parent = tip ? await this.doc(tip) : undefined;
    const sends = sortedWrites((parent?.writes ?? []).filter((w) => w[2] === TASKS));
    checkpoint.channel_values[TASKS] = await Promise.all(
      sends.map(([, , , typ, data]) => this.serde.loadsTyped(typ, unb64(data))),
    );
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = versions.length
      ? maxChannelVersion(...versions)
      : this.getNextVersion(undefined);
  }

  // -- one batch --------------------------------------------------------------

  /**
   * Commits a document (a `snapshot`) as a child of `parent`, or with
   * `writes` only those writes (a `delta` of write lines, `doc` being the
   * state they extend, when known), and moves each ref of `moves` to it, in
   * one `POST /v1/batch`. With `link` (a list value's new link, which the
   * document names as PARENT_LINK) the link is committed first in the batch
   * and is the document's parent. Answers the new tip. A stale expectation
   * throws the batch's conflict (field `refs[i].expected`), having written
   * nothing.
   */
  private async commitBatch(args: {
    doc: CheckpointDoc | undefined;
    threadId: string;
    parent: string | null;
    moves: Move[];
    trigger: "turn_boundary" | "tool_call";
    createdAt: string;
    link?: NewLink;
    writes?: WriteEntry[];
    artifacts?: BatchArtifact[];
  }): Promise<string> {
    const { threadId, moves, link, writes } = args;
    let doc = args.doc;
    if (writes === undefined && doc === undefined) throw new Error("commitBatch: a document or writes");
    const data = writes === undefined ? docLine(doc as CheckpointDoc) : writeLines(writes);
    const commit: BatchCommit = {
      principal: this.principal,
      template: TEMPLATE,
      format: "raw",
      delta: data,
      commit_type: writes === undefined ? "snapshot" : "delta",
      checkpoint: args.trigger,
      thread_id: commitThreadId(threadId),
      created_at: args.createdAt,
    };
    const commits: BatchCommit[] = [commit];
    if (link === undefined) {
      commit.parent = args.parent;
    } else {
      commit.parent_in_batch = 0;
      commits.unshift(this.linkCommit(threadId, link));
    }
    const at = commits.length - 1;
    const done = await this.api.batch({
      commits,
      refs: moves.map(([name, expected, onStale]) => ({
        name,
        expected,
        target_in_batch: at,
        ...(onStale === "conflict" ? {} : { on_stale: onStale }),
      })),
      artifacts: args.artifacts?.length ? args.artifacts : undefined,
    });
    const tip = done.commits[at];
    const linkId = done.commits[0];
    if (tip === undefined || linkId === undefined) {
      throw new Error(`the batch answered ${done.commits.length} commits for ${commits.length}`);
    }
    if (this.parentOf.size > 100_000) this.parentOf.clear();
    // The commit it follows (on a link: the LangGraph parent's tip, `pt`).
    if (args.parent) this.parentOf.set(tip, args.parent);
    let size = data.length;
    if (link !== undefined && doc !== undefined) {
      this.linked(linkId, link);
      doc = resolved(doc, linkId);
    }
    if (writes !== undefined && doc !== undefined) {
      doc = { ...doc, writes: merged(doc.writes, writes) };
      size = 2048 + doc.writes.reduce((n, w) => n + w[4].length, 0);
    }
    if (doc !== undefined) this.docs.put(tip, doc, size);
    // Where each ref is now: at the tip, or where a skipped move left it.
    moves.forEach(([name], i) => this.saw(name, done.refs[i] ?? null));
    return tip;
  }

  // -- BaseCheckpointSaver ----------------------------------------------------------

  /** The checkpoint `config` names, or the thread's newest; `undefined` when there is none. */
  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const conf = config.configurable ?? {};
    if (conf.thread_id === undefined || conf.thread_id === null) return undefined;
    const threadId = String(conf.thread_id);
    const ns = (conf.checkpoint_ns as string | undefined) ?? "";
    const checkpointId = getCheckpointId(config);
    const name = checkpointId
      ? this.names.checkpoint(threadId, ns, checkpointId)
      : this.names.head(threadId, ns);
    const doc = await this.stateAt(name);
    if (doc && !checkpointId) {
      // The head points at its checkpoint's tip (or just behind it): this
      // saver's first guess of that ref, so that the put of a thread it
      // resumes needs no read of its parent's ref.
      const own = this.names.checkpoint(threadId, ns, doc.id);
      const tip = this.tips.get(this.names.head(threadId, ns));
      if (this.tips.get(own) === undefined && tip) this.saw(own, tip);
    }
    return doc && this.tupleOf(threadId, ns, doc);
  }

  /**
   * The checkpoint state at a ref's tip (its document and writes) in one
   * request; `undefined` when there is no such checkpoint.
   */
  private async stateAt(name: string): Promise<CheckpointDoc | undefined> {
    let read: ReadAnswer;
    try {
      read = await this.api.readState({ ref: name });
    } catch (e) {
      if (isNotFound(e)) {
        this.saw(name, null);
        return undefined;
      }
      throw e;
    }
    this.saw(name, read.commit);
    const doc = this.docs.get(read.commit) ?? this.docOf(read);
    return doc.placeholder ? undefined : doc;
  }

  /**
   * DeltaChannel's ancestor walk (the contract of
   * `BaseCheckpointSaver.getDeltaChannelHistory`): from the checkpoint's
   * parent up, each ancestor's writes to the channels (oldest ancestor first,
   * each one's in LangGraph's order), until the nearest ancestor that holds a
   * value of the channel (its seed). The start is taken from this saver's
   * cache when it holds a state of it (only its parent is used, which never
   * changes), else read; its {@link VERIFY_NEAREST} nearest ancestors are
   * read by ref (one request each: writes may have landed after the child
   * was put); deeper ancestors come from this saver's
   * cache of the states it saw, when it saw their tips, and are read
   * otherwise. Only the seeds' values are loaded, not every channel's.
   */
  override async getDeltaChannelHistory(options: {
    config: RunnableConfig;
    channels: string[];
  }): Promise<Record<string, DeltaChannelHistory>> {
    const { config, channels } = options;
    if (channels.length === 0) return {};
    const collected = new Map<string, CheckpointPendingWrite[][]>(channels.map((ch) => [ch, []]));
    const seeds = new Map<string, unknown>();
    const conf = config.configurable ?? {};
    let start: CheckpointDoc | undefined;
    let threadId = "";
    let ns = "";
    if (conf.thread_id !== undefined && conf.thread_id !== null) {
      threadId = String(conf.thread_id);
      ns = (conf.checkpoint_ns as string | undefined) ?? "";
      const checkpointId = getCheckpointId(config);
      const name = checkpointId ? this.names.checkpoint(threadId, ns, checkpointId) : this.names.head(threadId, ns);
      // Only the start's parent is used, and a checkpoint's parent never
      // changes: a state of it this saver holds (getTuple just read it) will do.
      const seen = checkpointId ? this.tips.get(name) : undefined;
      start = (seen ? this.docs.get(seen) : undefined) ?? (await this.stateAt(name));
    }
    const remaining = new Set(channels);
    let parentId = start?.parent ?? undefined;
    for (let depth = 0; parentId && remaining.size > 0; depth++) {
      const name = this.names.checkpoint(threadId, ns, parentId);
      const tip = depth >= VERIFY_NEAREST ? this.tips.get(name) : undefined;
      const doc = (tip ? this.docs.get(tip) : undefined) ?? (await this.stateAt(name));
      if (doc === undefined) break; // a deleted ancestor ends the walk, as in LangGraph's own
      // pendingWrites sorts them.
      const loaded = await this.pendingWrites(doc.writes.filter((w) => remaining.has(w[2])));
      for (const ch of remaining) collected.get(ch)?.push(loaded.filter((w) => w[1] === ch));
      const held = [...remaining].filter((ch) => doc.values?.[ch] !== undefined);
      await Promise.all(
        held.map(async (ch) => {
          seeds.set(ch, await this.loadValue(doc.values?.[ch] as ValueEntry));
        }),
      );
      for (const ch of held) remaining.delete(ch);
      parentId = doc.parent ?? undefined;
    }
    const out: Record<string, DeltaChannelHistory> = {};
    for (const ch of channels) {
      const blocks = collected.get(ch) ?? [];
      const entry: DeltaChannelHistory = { writes: blocks.reverse().flat() };
      if (seeds.has(ch)) entry.seed = seeds.get(ch);
      out[ch] = entry;
    }
    return out;
  }

  /** Checkpoints, newest first, matching `options.filter` (metadata equality). */
  override async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let left = options.limit;
    const found = await this.found(config, before);
    for (let i = 0; i < found.length; i += LIST_BATCH) {
      if (left !== undefined && left <= 0) return;
      const page = found.slice(i, i + LIST_BATCH);
      const docs = await this.docsOf(page.map((f) => f.tip));
      for (let j = 0; j < page.length; j++) {
        const doc = docs[j];
        const at = page[j];
        if (doc === undefined || at === undefined || doc.placeholder || !doc.metadata) continue;
        if (filter && Object.keys(filter).length) {
          const md = (await this.serde.loadsTyped(doc.metadata[0], unb64(doc.metadata[1]))) as Record<
            string,
            unknown
          >;
          if (!Object.entries(filter).every(([k, v]) => md[k] === v)) continue;
        }
        if (left !== undefined && left <= 0) return;
        yield await this.tupleOf(at.threadId, at.ns, doc);
        if (left !== undefined) left -= 1;
      }
    }
  }

  /** The listed checkpoints, newest id first, before the metadata filter. */
  private async found(config: RunnableConfig, before: RunnableConfig | undefined): Promise<Found[]> {
    const conf = config.configurable ?? {};
    const threadId = conf.thread_id === undefined || conf.thread_id === null ? undefined : String(conf.thread_id);
    const ns = conf.checkpoint_ns as string | undefined;
    const wantedId = conf.checkpoint_id as string | undefined;
    let prefix: string;
    if (threadId === undefined) prefix = this.names.threads();
    else if (ns === undefined) prefix = this.names.thread(threadId);
    else prefix = this.names.checkpoints(threadId, ns);
    const refs = await this.listRefs(prefix);
    const beforeId = before ? getCheckpointId(before) : "";
    const out: Found[] = [];
    for (const r of refs) {
      const p = parseThreadRef(this.names, r.name);
      if (p === undefined || p.kind !== "c" || p.checkpointId === undefined) continue;
      const tid = threadId ?? unescapeSegment(p.threadSeg);
      const n = unescapeSegment(p.nsSeg);
      if (tid === undefined || n === undefined) continue; // stored under a hash: cannot be named
      if (ns !== undefined && n !== ns) continue;
      if (wantedId && p.checkpointId !== wantedId) continue;
      if (beforeId && !(p.checkpointId < beforeId)) continue;
      out.push({ threadId: tid, ns: n, checkpointId: p.checkpointId, tip: r.target });
    }
    out.sort((a, b) => (a.checkpointId < b.checkpointId ? 1 : a.checkpointId > b.checkpointId ? -1 : 0));
    return out;
  }

  /** Stores a checkpoint as a commit whose parent is its parent's tip: one batch. */
  override async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const conf = requireConfigurable(config, "put");
    const threadId = requireThreadId(conf, "put");
    const ns = (conf.checkpoint_ns as string | undefined) ?? "";
    const name = this.names.checkpoint(threadId, ns, checkpoint.id);
    const parentId = (conf.checkpoint_id as string | undefined) || undefined;
    // Writes of this checkpoint that came first (their placeholder is then
    // known, and taken over in the batch), and the parent's put (whose tip
    // this one goes on). Not the parent's writes (ADR 0008, v4): the head
    // goes to this checkpoint wherever they left it (`overwrite`), and
    // writes still on their way land on the parent's ref beside it.
    const after: [Map<string, Set<Promise<void>>>, string][] = [[this.writing, name]];
    if (parentId) after.push([this.putting, this.names.checkpoint(threadId, ns, parentId)]);
    const { end, before } = this.begin(this.putting, name, after);
    try {
      await CtxSaver.wait(before);
      await this.putNow(threadId, ns, parentId, checkpoint, metadata, newVersions);
    } finally {
      end();
    }
    return checkpointConfig(threadId, ns, checkpoint.id);
  }

  private async putNow(
    threadId: string,
    ns: string,
    parentId: string | undefined,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<void> {
    const name = this.names.checkpoint(threadId, ns, checkpoint.id);
    let parentTip: string | null = null;
    let parentValues: Record<string, ValueEntry> = {};
    if (parentId) {
      const parentName = this.names.checkpoint(threadId, ns, parentId);
      parentTip = await this.knownRef(parentName);
      let parentDoc = parentTip ? await this.doc(parentTip) : undefined;
      if (parentDoc?.placeholder) {
        // A guess older than the parent's put: read where the parent is now.
        parentTip = await this.getRef(parentName);
        parentDoc = parentTip ? await this.doc(parentTip) : undefined;
      }
      parentValues = parentDoc?.values ?? {};
    }

    const { channel_values: channelValues, ...rest } = checkpoint;
    const versions = checkpoint.channel_versions ?? {};
    const entries: Record<string, ValueEntry> = {};
    const uploads: [string, string, Uint8Array][] = [];
    const grown: [string, NewLink][] = [];
    for (const [ch, value] of Object.entries(channelValues ?? {})) {
      if (value === undefined) continue;
      const version = versions[ch] ?? null;
      const old = parentValues[ch];
      if (!(ch in newVersions)) {
        // Unchanged: the parent's entry when its version is this one; a
        // value whose version is not new and that the parent does not hold
        // is not stored (as LangGraph's savers that store by version).
        if (old !== undefined && old[2] === version) entries[ch] = old;
        continue;
      }
      if (this.listDeltas && Array.isArray(value) && value.length > 0) {
        const link = await this.listLink(value, old);
        if (typeof link === "string") {
          entries[ch] = [LIST_KIND, link, version];
        } else {
          entries[ch] = [LIST_KIND, "", version];
          grown.push([ch, link]);
        }
        continue;
      }
      const [typ, data] = await this.serde.dumpsTyped(value);
      if (data.length > INLINE_VALUE_BYTES) uploads.push([ch, typ, data]);
      else if (data.length > 0) entries[ch] = [typ, INLINE + b64(data), version];
      else entries[ch] = [typ, "", version];
    }
    // One list that grew (add_messages) goes in the batch: its link is the
    // document's commit's parent. Others are committed first, concurrently.
    let budget = BATCH_VALUE_BYTES - uploads.reduce((n, [, , d]) => n + d.length, 0);
    let inBatch: NewLink | undefined;
    const first = grown[0];
    if (first !== undefined && first[1].records.length <= budget) {
      grown.shift();
      const [ch, link] = first;
      inBatch = link;
      entries[ch] = [LIST_KIND, PARENT_LINK, versions[ch] ?? null];
      budget -= link.records.length;
    }
    // The values go in the batch, named by their hashes, up to the budget;
    // past it each is uploaded first.
    const artifacts: BatchArtifact[] = [];
    if (budget >= 0) {
      for (const [ch, typ, data] of uploads) {
        const ref = artifactRefOf(data);
        entries[ch] = [typ, ref, versions[ch] ?? null];
        artifacts.push({ ref, ...artifactBody(data) });
        this.blobs.put(ref, data, data.length);
      }
    }
    await Promise.all([
      ...grown.map(async ([ch, link]) => {
        const id = await this.api.checkpoint(this.linkCommit(threadId, link));
        this.linked(id, link);
        entries[ch] = [LIST_KIND, id, versions[ch] ?? null];
      }),
      ...(budget >= 0 ? [] : uploads).map(async ([ch, typ, data]) => {
        const ref = await this.api.uploadArtifact(data);
        this.blobs.put(ref, data, data.length);
        entries[ch] = [typ, ref, versions[ch] ?? null];
      }),
    ]);

    const [[ckT, ckB], [mdT, mdB]] = await Promise.all([
      this.serde.dumpsTyped(rest),
      this.serde.dumpsTyped(metadata),
    ]);
    // Channel entries in the checkpoint's order (the uploads finished in any).
    const values: Record<string, ValueEntry> = {};
    for (const ch of Object.keys(channelValues ?? {})) if (entries[ch]) values[ch] = entries[ch];
    let doc: CheckpointDoc = {
      v: DOC_VERSION,
      id: checkpoint.id,
      parent: parentId ?? null,
      checkpoint: [ckT, b64(ckB)],
      metadata: [mdT, b64(mdB)],
      values,
      writes: [],
    };
    // The document's commit sits on the link, not on the parent's tip.
    if (inBatch) doc.pt = parentTip;
    // The checkpoint's ref must not exist, unless this saver saw it: a
    // placeholder of writes that came first, or the same checkpoint put
    // before, whose writes the new document keeps.
    const expected = this.tips.get(name) ?? null;
    if (expected) doc.writes = (await this.doc(expected)).writes;
    const head = this.names.head(threadId, ns);
    const moves: Move[] = [
      [name, expected, "conflict"],
      [head, this.tips.get(head) ?? null, "overwrite"],
    ];
    const when = createdAt(checkpoint.ts);
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        await this.commitBatch({
          doc,
          threadId,
          parent: parentTip,
          moves,
          trigger: "turn_boundary",
          createdAt: when,
          link: inBatch,
          artifacts,
        });
        return;
      } catch (e) {
        const { k, name: moved, current } = lostMove(e, moves);
        moves[k] = [moved, current, moves[k]?.[2] ?? "conflict"];
        this.saw(moved, current);
        if (k === 0) {
          // The checkpoint's ref exists: writes that arrived before the
          // checkpoint, or the same checkpoint put again. Keep its writes
          // (none when the ref this saver saw has gone since).
          doc = { ...doc, writes: current ? (await this.doc(current)).writes : [] };
        }
      }
    }
    throw new Error(`refs of checkpoint ${checkpoint.id} kept moving while putting it`);
  }

  /** Attaches writes to a checkpoint: a delta commit on its tip, its ref moved by CAS. */
  override async putWrites(
    config: RunnableConfig,
    writes: PendingWrite[],
    taskId: string,
    taskPath = "",
  ): Promise<void> {
    const conf = requireConfigurable(config, "putWrites");
    const threadId = requireThreadId(conf, "putWrites");
    const checkpointId = conf.checkpoint_id;
    if (typeof checkpointId !== "string" || !checkpointId) {
      throw new Error("putWrites: the config's configurable has no checkpoint_id");
    }
    const ns = (conf.checkpoint_ns as string | undefined) ?? "";
    const name = this.names.checkpoint(threadId, ns, checkpointId);
    // The checkpoint's put, when it is on its way: the writes then go on its tip.
    const { end, before } = this.begin(this.writing, name, [[this.putting, name]]);
    try {
      await CtxSaver.wait(before);
      await this.putWritesNow(threadId, ns, checkpointId, writes, taskId, taskPath);
    } finally {
      end();
    }
  }

  private async putWritesNow(
    threadId: string,
    ns: string,
    checkpointId: string,
    writes: PendingWrite[],
    taskId: string,
    taskPath: string,
  ): Promise<void> {
    const name = this.names.checkpoint(threadId, ns, checkpointId);
    const entries: WriteEntry[] = await Promise.all(
      writes.map(async ([channel, value], idx) => {
        const [typ, data] = await this.serde.dumpsTyped(value);
        return [taskId, WRITES_IDX_MAP[channel] ?? idx, channel, typ, b64(data), taskPath] as WriteEntry;
      }),
    );
    const head = this.names.head(threadId, ns);
    // A checkpoint this saver never saw is taken not to exist yet; a 409 says otherwise.
    let tip = this.tips.get(name) ?? null;
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      let doc: CheckpointDoc | undefined;
      let fresh: WriteEntry[] | undefined;
      if (tip === null) {
        // The checkpoint's put has not landed: the writes wait in a
        // placeholder document that the put takes them from.
        doc = { v: DOC_VERSION, id: checkpointId, placeholder: true, writes: merged([], entries) };
      } else {
        doc = this.docs.get(tip);
        fresh = doc ? freshWrites(doc.writes, entries) : entries;
        if (fresh.length === 0) return;
      }
      const moves: Move[] = [[name, tip, "conflict"]];
      // The head follows this checkpoint if it still points at it, and stays
      // where it is otherwise (a newer checkpoint's put may have landed
      // first): no guess, and no 409 either way.
      if (tip !== null) moves.push([head, tip, "skip"]);
      try {
        await this.commitBatch({
          doc,
          threadId,
          parent: tip,
          moves,
          trigger: "tool_call",
          createdAt: new Date().toISOString(),
          writes: fresh,
        });
        return;
      } catch (e) {
        const { name: moved, current } = lostMove(e, moves);
        this.saw(moved, current);
        // Another task's writes (or the put) landed first: go on its tip.
        tip = current;
      }
    }
    throw new Error(`writes to checkpoint ${checkpointId} kept conflicting`);
  }

  /** Removes the thread's refs (its commits stay reachable by id until garbage collection). */
  override async deleteThread(threadId: string): Promise<void> {
    const refs = await this.listRefs(this.names.thread(threadId));
    await Promise.all(
      refs.map(async (r) => {
        this.tips.delete(r.name);
        await this.api.deleteRef(r.name);
      }),
    );
  }
}
