// The Claude Agent SDK's `SessionStore` on ctx: `CtxSessionStore`.
//
// The same mapping as the Python store (ctx_client.claude), on the same
// refs, so a session written by either, or by the Claude Code hooks
// (`ctx hook claude-code`), resumes from any of them:
//
// - One ref per key: `claude/{projectKey}/{sessionId}` for a main
//   transcript, `claude/{projectKey}/{sessionId}/{subpath}` for a subagent
//   transcript, each part escaped into ref-name characters (`encodeSegment`).
// - `append` is one `claude-code-v1` delta checkpoint whose delta is the
//   batch as JSONL, moving the ref by compare-and-swap on the tip this store
//   last wrote, in one request (`POST /v1/batch`, with the folded session
//   summary as an inline artifact). On a 409 (another writer, the hooks, or
//   an earlier call whose answer was lost) it reads the chain and tries
//   again on the new tip: a batch the chain holds whole (by `uuid`, those
//   without one by content) is a re-send and done; otherwise the entries
//   whose `uuid` the chain holds are dropped and the rest appended.
// - `load` reads the tip with `stop: root` (a compaction never cuts a
//   resumed transcript) in one request and parses the JSONL back.
// - The summary `foldSessionSummary` keeps is an artifact named by the tip
//   commit's tag `claude.summary-ts` (the Python SDK's summary data has
//   other field names, under `claude.summary`): when the tip is another
//   writer's, it is folded over the whole transcript.
// - `delete` removes the ref (and, for a main key, its subkeys' refs); the
//   commits stay reachable by id until erased by the lifecycle operations.
import type {
  SessionKey,
  SessionStore,
  SessionStoreEntry,
  SessionSummaryEntry,
} from "@anthropic-ai/claude-agent-sdk";
import { foldSessionSummary } from "@anthropic-ai/claude-agent-sdk";
import { blake3 } from "@noble/hashes/blake3.js";
import { bytesToHex } from "@noble/hashes/utils.js";

import { type Client, type Commit, artifactRefOf } from "./client.js";
import { ConflictError, CtxError, NotFoundError } from "./errors.js";
import { decodeSegment, encodeSegment } from "./names.js";

export { decodeSegment, encodeSegment };

export const FORMAT = "claude-code-v1";
export const TAG_SUMMARY = "claude.summary-ts";
/** An entry whose own type is this one is stored wrapped in one; load unwraps every one. */
const VERBATIM = "ctx-verbatim";
/** ctx's ref-name limit, and the length of the session ids (UUIDs) a project's prefix is sized for. */
const MAX_REF = 200;
const SESSION_ID_LEN = 36;
const MAX_REFS = 1000;
/**
 * The largest delta (characters) an append sends in one batch with its
 * folded summary; a larger one uploads the summary, then checkpoints (which
 * uploads a large delta itself).
 */
const BATCH_DELTA_CHARS = 256 * 1024;

export interface CtxSessionStoreOptions {
  /** The first part of every ref name (`claude`, where the Claude Code hooks write too). */
  namespace?: string;
  /** Recorded on each commit. */
  principal?: string;
  /** Recorded on each commit. */
  template?: string;
  /** How many times an append that keeps losing the compare-and-swap tries. */
  maxAttempts?: number;
  /** Seconds: the n-th retry waits a random part of `conflictBackoff * 2**n` (at most 1 s). */
  conflictBackoff?: number;
}

type Entry = SessionStoreEntry;

function uuidOf(entry: Entry): string | undefined {
  return typeof entry.uuid === "string" ? entry.uuid : undefined;
}

/** JSON with object keys sorted: one text per value, whatever the key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const o = value as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .filter((k) => o[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

function fingerprint(entry: Entry): string {
  return bytesToHex(blake3(new TextEncoder().encode(canonical(entry)), { dkLen: 16 }));
}

/** What this process knows of a key's ref: the tip, the entries up to it, the summary there. */
class Tip {
  readonly known = new Set<string>();
  readonly seen = new Set<string>();
  summary: SessionSummaryEntry | undefined;

  constructor(
    public commit: string | null,
    entries: Entry[],
  ) {
    this.add(entries);
  }

  add(entries: Entry[]): void {
    for (const e of entries) {
      const u = uuidOf(e);
      if (u !== undefined) this.known.add(u);
      else this.seen.add(fingerprint(e));
    }
  }

  /** Whether `batch` is a re-send: it has a uuid, and every entry of it is on the chain. */
  holds(batch: Entry[]): boolean {
    return (
      batch.some((e) => uuidOf(e) !== undefined) &&
      batch.every((e) => {
        const u = uuidOf(e);
        return u !== undefined ? this.known.has(u) : this.seen.has(fingerprint(e));
      })
    );
  }
}

/** A transcript's entries (JSONL), verbatim ones unwrapped; a line that is not JSON is skipped. */
export function entriesOf(data: Uint8Array): Entry[] {
  const out: Entry[] = [];
  // Only "\n" ends a line (not U+2028).
  for (const line of new TextDecoder().decode(data).split("\n")) {
    if (line.trim() === "") continue;
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      // Claude Code's own loader skips a damaged line too.
      continue;
    }
    if (entry !== null && typeof entry === "object" && (entry as Entry).type === VERBATIM && "entry" in entry) {
      entry = (entry).entry;
    }
    out.push(entry as Entry);
  }
  return out;
}

function line(entry: Entry): string {
  const e = entry.type === VERBATIM ? { type: VERBATIM, entry } : entry;
  return `${JSON.stringify(e)}\n`;
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

/** A ref's `updated_at` as epoch milliseconds. */
function ms(rfc3339: string): number {
  return Math.floor(Date.parse(rfc3339));
}

export class CtxSessionStore implements SessionStore {
  readonly namespace: string;
  readonly principal: string;
  readonly template: string;
  readonly maxAttempts: number;
  readonly conflictBackoff: number;
  private readonly tips = new Map<string, Tip>();
  private lastUs = 0;

  constructor(
    readonly client: Client,
    options: CtxSessionStoreOptions = {},
  ) {
    this.namespace = (options.namespace ?? "claude").replace(/^\/+|\/+$/g, "");
    this.principal = options.principal ?? "claude-agent-sdk";
    this.template = options.template ?? "claude-agent-sdk";
    this.maxAttempts = options.maxAttempts ?? 32;
    this.conflictBackoff = options.conflictBackoff ?? 0.005;
  }

  // --- keys -------------------------------------------------------------------

  /**
   * `{namespace}/{project}/`. The project part is shortened as the hooks
   * shorten it (its first characters, `-` and 16 hex digits of the key's
   * BLAKE3) when a session's ref would pass ctx's 200 bytes.
   */
  private sessionPrefix(projectKey: string): string {
    const seg = encodeSegment(projectKey);
    const fixed = this.namespace.length + 1 + 1 + SESSION_ID_LEN;
    if (fixed + seg.length <= MAX_REF) return `${this.namespace}/${seg}/`;
    const digest = bytesToHex(blake3(new TextEncoder().encode(projectKey))).slice(0, 16);
    const keep = Math.max(MAX_REF - (fixed + 1 + 16), 0);
    return `${this.namespace}/${seg.slice(0, keep)}-${digest}/`;
  }

  /** The ref that holds `key`'s transcript. */
  refName(key: SessionKey): string {
    let name = this.sessionPrefix(key.projectKey) + encodeSegment(key.sessionId);
    if (key.subpath) name += `/${key.subpath.split("/").map(encodeSegment).join("/")}`;
    if (name.length > MAX_REF) {
      throw new CtxError(`the ref name for this key is ${name.length} bytes, over ctx's ${MAX_REF}: ${name}`, {
        kind: "invalid",
        field: "key",
      });
    }
    return name;
  }

  // --- append -----------------------------------------------------------------

  /**
   * Now, strictly later than this store's previous checkpoint, to the
   * microsecond: a commit id derives from (parent, delta, time, template),
   * so two equal batches on two new keys would otherwise be one commit.
   */
  private createdAt(): string {
    this.lastUs = Math.max(Date.now() * 1000, this.lastUs + 1);
    const iso = new Date(Math.floor(this.lastUs / 1000)).toISOString();
    return `${iso.slice(0, -1)}${String(this.lastUs % 1000).padStart(3, "0")}Z`;
  }

  /** The ref's tip and its entries in one request; `null` when the ref has no commit (the empty context answered). */
  private async read(ref: string): Promise<{ commit: string; entries: Entry[] } | null> {
    const got = await this.client.readBytes({ ref, stop: "root" });
    return got.commit === null ? null : { commit: got.commit, entries: entriesOf(got.bytes) };
  }

  /** The summary at `commit`: the one its tag names, or folded over the whole transcript. */
  private async summaryAt(key: SessionKey, commit: string, entries?: Entry[]): Promise<SessionSummaryEntry> {
    const tags = (await this.client.getCommit(commit)).tags ?? {};
    const art = tags[TAG_SUMMARY];
    if (art) {
      const stored = JSON.parse(new TextDecoder().decode(await this.client.downloadArtifact(art))) as {
        sessionId: string;
        data: Record<string, unknown>;
      };
      return { sessionId: stored.sessionId, mtime: 0, data: stored.data };
    }
    const all = entries ?? entriesOf((await this.client.readBytes({ commit, stop: "root" })).bytes);
    return foldSessionSummary(undefined, key, all);
  }

  /** Where the ref is now, and what it holds. */
  private async refresh(ref: string, key: SessionKey): Promise<Tip> {
    const got = await this.read(ref);
    const tip = new Tip(got?.commit ?? null, got?.entries ?? []);
    if (got !== null && !key.subpath) tip.summary = await this.summaryAt(key, got.commit, got.entries);
    this.tips.set(ref, tip);
    return tip;
  }

  /** Appends `entries` as one commit on the key's ref (see the module comment). */
  async append(key: SessionKey, entries: Entry[]): Promise<void> {
    if (entries.length === 0) return;
    const ref = this.refName(key);
    const main = !key.subpath;
    // Unknown here: the ref may hold entries of this batch already.
    let tip = this.tips.get(ref) ?? (await this.refresh(ref, key));
    let summarized: { for: string | null; pending: number; ref: string; fold: SessionSummaryEntry; text: string } | undefined;
    for (let conflicts = 0; ; ) {
      if (tip.holds(entries)) return; // all of it is on the chain already: a re-send
      // Entries without a uuid are appended as sent.
      const pending = entries.filter((e) => {
        const u = uuidOf(e);
        return u === undefined || !tip.known.has(u);
      });
      const tags: Record<string, string> = {};
      if (main) {
        if (summarized === undefined || summarized.for !== tip.commit || summarized.pending !== pending.length) {
          if (tip.summary === undefined && tip.commit !== null) tip.summary = await this.summaryAt(key, tip.commit);
          const fold = foldSessionSummary(tip.summary, key, pending);
          const text = canonical({ sessionId: fold.sessionId, data: fold.data });
          summarized = { for: tip.commit, pending: pending.length, ref: artifactRefOf(text), fold, text };
        }
        tags[TAG_SUMMARY] = summarized.ref;
      }
      const delta = pending.map(line).join("");
      const fields = {
        principal: this.principal,
        template: this.template,
        format: FORMAT,
        commit_type: "delta" as const,
        checkpoint: "turn_boundary" as const,
        delta,
        parent: tip.commit,
        session_id: encodeSegment(key.sessionId),
        created_at: this.createdAt(),
        tags,
      };
      let commit: Commit;
      try {
        if (summarized !== undefined && delta.length <= BATCH_DELTA_CHARS) {
          // The folded summary and the commit naming it: one request, one atomic write.
          const done = await this.client.batch({
            commits: [fields],
            refs: [{ name: ref, expected: tip.commit, target_in_batch: 0 }],
            artifacts: [{ ref: summarized.ref, text: summarized.text }],
          });
          commit = done.commits[0]!;
        } else {
          if (summarized !== undefined) await this.client.uploadArtifact(summarized.text);
          commit = await this.client.checkpoint({ ...fields, ref: { name: ref, expected: tip.commit } });
        }
      } catch (e) {
        if (!(e instanceof ConflictError)) throw e;
        // Another writer moved the ref (or removed it), or an earlier call
        // of ours landed unseen: rebase on where it is now.
        conflicts += 1;
        if (conflicts >= this.maxAttempts) {
          throw new ConflictError(`ref ${ref} kept moving: gave up after ${this.maxAttempts} attempts`, {
            kind: "conflict",
            field: "ref",
          });
        }
        if (this.conflictBackoff > 0) await sleep(Math.random() * Math.min(this.conflictBackoff * 2 ** conflicts, 1));
        tip = await this.refresh(ref, key);
        continue;
      }
      tip.commit = commit.id;
      tip.add(pending);
      tip.summary = summarized?.fold;
      return;
    }
  }

  // --- load -------------------------------------------------------------------

  /** The key's entries, oldest first, or `null` if it has no ref. */
  async load(key: SessionKey): Promise<Entry[] | null> {
    return (await this.read(this.refName(key)))?.entries ?? null;
  }

  // --- listing ----------------------------------------------------------------

  /** Every ref under `prefix`, a page at a time. */
  private async refsUnder(prefix: string) {
    return this.client.listAllRefs(prefix, MAX_REFS);
  }

  private async mainRefs(projectKey: string) {
    const prefix = this.sessionPrefix(projectKey);
    return (await this.refsUnder(prefix)).filter((r) => !r.name.slice(prefix.length).includes("/"));
  }

  /** The project's sessions (main transcripts), with their ref's last move in epoch ms. */
  async listSessions(projectKey: string): Promise<Array<{ sessionId: string; mtime: number }>> {
    const prefix = this.sessionPrefix(projectKey);
    return (await this.mainRefs(projectKey)).map((r) => ({
      sessionId: decodeSegment(r.name.slice(prefix.length)),
      mtime: ms(r.updated_at),
    }));
  }

  /** The summaries `append` folded, one per session, `mtime` as in `listSessions`. */
  async listSessionSummaries(projectKey: string): Promise<SessionSummaryEntry[]> {
    const prefix = this.sessionPrefix(projectKey);
    const out: SessionSummaryEntry[] = [];
    for (const r of await this.mainRefs(projectKey)) {
      const key = { projectKey, sessionId: decodeSegment(r.name.slice(prefix.length)) };
      try {
        out.push({ ...(await this.summaryAt(key, r.target)), mtime: ms(r.updated_at) });
      } catch (e) {
        if (!(e instanceof NotFoundError)) throw e; // deleted meanwhile
      }
    }
    return out;
  }

  /** The subpaths stored under a session. */
  async listSubkeys(key: { projectKey: string; sessionId: string }): Promise<string[]> {
    const prefix = `${this.refName(key)}/`;
    return (await this.refsUnder(prefix)).map((r) => r.name.slice(prefix.length).split("/").map(decodeSegment).join("/"));
  }

  // --- delete -----------------------------------------------------------------

  private async deleteRef(ref: string): Promise<void> {
    this.tips.delete(ref);
    try {
      await this.client.deleteRef(ref);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }

  /** Removes the key's ref; for a main key its subkeys' refs too. */
  async delete(key: SessionKey): Promise<void> {
    const ref = this.refName(key);
    if (!key.subpath) {
      for (const r of await this.refsUnder(`${ref}/`)) await this.deleteRef(r.name);
    }
    await this.deleteRef(ref);
  }
}
