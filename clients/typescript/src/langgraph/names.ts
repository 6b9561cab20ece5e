/**
 * Ref names: thread ids, namespaces, run ids and checkpoint ids as
 * segments of the saver's refs (ADR 0008, "Refs make checkpoints visible").
 *
 * The layout and both hashes (a long segment's, and a checkpoint's bucket:
 * BLAKE2b of 16 and of 1 byte) are the Python saver's, so both name a
 * thread's refs alike (they still do not share checkpoints: their
 * serializers' bytes differ).
 */

import { blake2b } from "@noble/hashes/blake2.js";
import { bytesToHex } from "@noble/hashes/utils.js";

/** Longest escaped thread id / namespace / run id kept readable in a ref name. */
export const MAX_SEGMENT = 48;

const PLAIN = /^[A-Za-z0-9_-]$/;
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

function escape(text: string): string {
  let out = "";
  for (const ch of text) {
    if (PLAIN.test(ch)) {
      out += ch;
    } else {
      for (const b of encoder.encode(ch)) out += "." + b.toString(16).padStart(2, "0");
    }
  }
  return out;
}

/** The text of an escaped segment (`_` + escaped text); `undefined` for a hashed one. */
export function unescapeSegment(seg: string): string | undefined {
  if (!seg.startsWith("_")) return undefined;
  const raw: number[] = [];
  for (let i = 1; i < seg.length; ) {
    if (seg[i] === ".") {
      raw.push(parseInt(seg.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      raw.push(seg.charCodeAt(i));
      i += 1;
    }
  }
  try {
    return decoder.decode(new Uint8Array(raw));
  } catch {
    return undefined;
  }
}

/** BLAKE2b of `text` with a `bytes`-byte digest, hex (Python's `hashlib.blake2b(digest_size=…)`). */
function blake2bHex(text: string, bytes: number): string {
  return bytesToHex(blake2b(encoder.encode(text), { dkLen: bytes }));
}

/**
 * A thread id, namespace or run id as one ref-name segment: `_` and the text
 * with every byte outside `A-Za-z0-9_-` as `.xx`; or `h` and a hash when that
 * is longer than {@link MAX_SEGMENT}.
 */
export function encodeSegment(text: string): string {
  const seg = "_" + escape(text);
  if (seg.length <= MAX_SEGMENT) return seg;
  return "h" + blake2bHex(text, 16);
}

/** Two hex characters of a hash of the checkpoint id: its listing bucket. */
export function bucket(checkpointId: string): string {
  return blake2bHex(checkpointId, 1);
}

/** A checkpoint id as a segment; ids that escape to more than MAX_SEGMENT are refused. */
export function checkpointSegment(checkpointId: string): string {
  const seg = escape(checkpointId);
  if (!seg || seg.length > MAX_SEGMENT) {
    throw new Error(
      `checkpoint_id ${JSON.stringify(checkpointId)}: 1 to ${MAX_SEGMENT} characters ` +
        "(after escaping) are supported",
    );
  }
  return seg;
}

/** The ref names of one saver (`prefix` is their first segment or segments). */
export class Names {
  readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix.replace(/^\/+|\/+$/g, "");
    if (!this.prefix) throw new Error("prefix: a non-empty ref name is required");
  }

  /** Every thread's refs start with this. */
  threads(): string {
    return `${this.prefix}/t/`;
  }

  thread(threadId: string): string {
    return `${this.threads()}${encodeSegment(threadId)}/`;
  }

  ns(threadId: string, ns: string): string {
    return `${this.thread(threadId)}${encodeSegment(ns)}/`;
  }

  checkpoints(threadId: string, ns: string): string {
    return `${this.ns(threadId, ns)}c/`;
  }

  checkpoint(threadId: string, ns: string, checkpointId: string): string {
    const seg = checkpointSegment(checkpointId);
    return `${this.checkpoints(threadId, ns)}${bucket(checkpointId)}/${seg}`;
  }

  head(threadId: string, ns: string): string {
    return `${this.ns(threadId, ns)}head`;
  }

}

/** A ref name under `{prefix}/t/`, taken apart. */
export interface ParsedRef {
  threadSeg: string;
  nsSeg: string;
  kind: "c" | "head";
  /** The checkpoint id of a `c` ref. */
  checkpointId?: string;
}

/** `name` taken apart, or `undefined` when it is not one of a thread's refs. */
export function parseThreadRef(names: Names, name: string): ParsedRef | undefined {
  const base = names.threads();
  if (!name.startsWith(base)) return undefined;
  const [threadSeg, nsSeg, kind, , idSeg, ...more] = name.slice(base.length).split("/");
  if (threadSeg === undefined || nsSeg === undefined || more.length) return undefined;
  if (kind === "head" && idSeg === undefined) return { threadSeg, nsSeg, kind: "head" };
  if (kind === "c" && idSeg !== undefined) {
    const id = unescapeSegment("_" + idSeg);
    if (id === undefined) return undefined;
    return { threadSeg, nsSeg, kind: "c", checkpointId: id };
  }
  return undefined;
}
