/**
 * The checkpoint document: its constants and encodings (ADR 0008).
 *
 * A checkpoint's commit holds one JSON line, its document:
 * `{v, id, parent, checkpoint: [type, base64], metadata: [type, base64],
 * values: {channel: [type, ref, version]}, writes: [], pt?}`; the writes
 * that `putWrites` adds are `delta` commits after it, one JSON array a line
 * (`[task_id, idx, channel, type, base64, task_path]`), so a read of the
 * deltas from the document's commit (the nearest snapshot) joins them into
 * the checkpoint's state.
 */

import { compareWritesSortKeys, writesSortKey } from "@langchain/langgraph-checkpoint";

/** The document version: 3, as the Python saver's (a list entry may be PARENT_LINK). */
export const DOC_VERSION = 3;
/** The commits' template. */
export const TEMPLATE = "langgraph";
/** The type slot of a value entry stored as a ctx chain of list elements. */
export const LIST_KIND = "ctx-list";
/** The ref slot of a value entry holding its bytes: INLINE + base64. */
export const INLINE = "=";
/** The largest value kept in its entry rather than as an artifact. */
export const INLINE_VALUE_BYTES = 1024;
/**
 * The ref slot of a list entry whose link is the parent of the commit that
 * holds the document (the link and the document are committed in one batch).
 */
export const PARENT_LINK = "^";

/** A value entry: [serializer type or LIST_KIND, ref, channel version]. */
export type ValueEntry = [string, string, string | number | null];

/** A pending write: [task_id, idx, channel, type, base64 bytes, task_path]. */
export type WriteEntry = [string, number, string, string, string, string];

/** A checkpoint document, or a placeholder of writes that came before it. */
export interface CheckpointDoc {
  v: number;
  id: string;
  parent?: string | null;
  checkpoint?: [string, string];
  metadata?: [string, string];
  values?: Record<string, ValueEntry>;
  writes: WriteEntry[];
  /** The LangGraph parent's tip, when the commit's ctx parent is a link. */
  pt?: string | null;
  /** Writes waiting for their checkpoint's put (not a checkpoint). */
  placeholder?: boolean;
}

export function b64(data: Uint8Array): string {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("base64");
}

export function unb64(text: string): Uint8Array {
  return new Uint8Array(Buffer.from(text, "base64"));
}

/** `doc` as read from a commit whose parent is `parent`: a PARENT_LINK entry names it. */
export function resolved(doc: CheckpointDoc, parent: string | null | undefined): CheckpointDoc {
  const values = doc.values;
  if (!values || !Object.values(values).some((e) => e[1] === PARENT_LINK)) return doc;
  if (!parent) {
    throw new Error(`checkpoint ${doc.id} names its parent as a list link, and has none`);
  }
  const out: Record<string, ValueEntry> = {};
  for (const [ch, e] of Object.entries(values)) {
    out[ch] = e[1] === PARENT_LINK ? [e[0], parent, e[2]] : e;
  }
  return { ...doc, values: out };
}

/** A serialized list element. */
export type Element = [string, Uint8Array];

/**
 * Serialized list elements as length-prefixed records (u32 big-endian type
 * length, type, u32 data length, data), so that the byte append of a `raw`
 * chain concatenates lists.
 */
export function encodeRecords(elements: Element[]): Uint8Array {
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (const [typ, data] of elements) {
    const t = enc.encode(typ);
    const head = new Uint8Array(4 + t.length + 4);
    const view = new DataView(head.buffer);
    view.setUint32(0, t.length);
    head.set(t, 4);
    view.setUint32(4 + t.length, data.length);
    parts.push(head, data);
    size += head.length + data.length;
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function decodeRecords(data: Uint8Array): Element[] {
  const dec = new TextDecoder();
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const out: Element[] = [];
  let i = 0;
  while (i < data.length) {
    if (i + 4 > data.length) throw new Error(`list records: truncated at byte ${i}`);
    const n = view.getUint32(i);
    const typ = dec.decode(data.subarray(i + 4, i + 4 + n));
    i += 4 + n;
    if (i + 4 > data.length) throw new Error(`list records: truncated at byte ${i}`);
    const m = view.getUint32(i);
    if (i + 4 + m > data.length) throw new Error(`list records: truncated at byte ${i}`);
    out.push([typ, data.slice(i + 4, i + 4 + m)]);
    i += 4 + m;
  }
  return out;
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The commit time: the checkpoint's own `ts` when it parses, else now. */
export function createdAt(ts: string | undefined): string {
  if (ts) {
    const t = Date.parse(ts);
    if (!Number.isNaN(t)) return new Date(t).toISOString();
  }
  return new Date().toISOString();
}

/** A document as its commit holds it: one JSON line. */
export function docLine(doc: CheckpointDoc): string {
  return JSON.stringify(doc) + "\n";
}

/** Writes as a delta commit holds them: one JSON array a line. */
export function writeLines(entries: WriteEntry[]): string {
  return entries.map((e) => JSON.stringify(e) + "\n").join("");
}

function key(w: WriteEntry): string {
  return JSON.stringify([w[0], w[1]]);
}

/**
 * `writes` with `fresh` added by (task_id, idx): a repeat of a regular write
 * is dropped, a special channel's (negative idx) replaces the earlier one,
 * as in LangGraph's own savers.
 */
export function merged(writes: WriteEntry[], fresh: WriteEntry[]): WriteEntry[] {
  const out = new Map<string, WriteEntry>();
  for (const w of writes) out.set(key(w), w);
  for (const w of fresh) {
    const k = key(w);
    if (w[1] >= 0 && out.has(k)) continue;
    out.set(k, w);
  }
  return [...out.values()];
}

/** The writes of `fresh` that {@link merged} would not drop as repeats of `writes`. */
export function freshWrites(writes: WriteEntry[], fresh: WriteEntry[]): WriteEntry[] {
  const known = new Map<string, WriteEntry>();
  for (const w of writes) known.set(key(w), w);
  return fresh.filter((w) => {
    const old = known.get(key(w));
    if (old === undefined) return true;
    if (w[1] >= 0) return false;
    return JSON.stringify(old) !== JSON.stringify(w);
  });
}

/** Writes in the order LangGraph applies them: (task_path, task_id, idx). */
export function sortedWrites(writes: WriteEntry[]): WriteEntry[] {
  return [...writes].sort((a, b) =>
    compareWritesSortKeys(writesSortKey(a[5], a[0], a[1]), writesSortKey(b[5], b[0], b[1])),
  );
}

/**
 * The checkpoint state that `text` holds: the document's line (from a commit
 * whose parent is `parent`) and the write lines after it.
 */
export function stateOf(text: string, parent: string | null | undefined): CheckpointDoc {
  const lines = text.split("\n").filter((l) => l.length > 0);
  const first = lines[0];
  if (first === undefined) throw new Error("checkpoint state: empty");
  const doc = resolved(JSON.parse(first) as CheckpointDoc, parent);
  const more = lines.slice(1).map((l) => JSON.parse(l) as WriteEntry);
  const base = doc.writes ?? [];
  return more.length ? { ...doc, writes: merged(base, more) } : { ...doc, writes: base };
}
