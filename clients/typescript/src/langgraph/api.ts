/**
 * The API calls the saver makes, in one place, over the typed client: each
 * answers what the saver uses (a ref's target or `null`, a batch's commit
 * ids, a read's bytes and parent).
 */

import { Client, type BatchRequest, type ReadRequest } from "../client.js";
import { CtxError } from "../errors.js";

/** A commit of a batch (or of `POST /v1/commits`). */
export type BatchCommit = NonNullable<BatchRequest["commits"]>[number];
/** An artifact sent inline in a batch. */
export type BatchArtifact = NonNullable<BatchRequest["artifacts"]>[number];
/** A ref move of a batch. */
export type BatchRef = NonNullable<BatchRequest["refs"]>[number];

/** What a read answered: the commit read, its parent, and its bytes. */
export interface ReadAnswer {
  commit: string;
  parent: string | null;
  bytes: Uint8Array;
}

export class Api {
  constructor(readonly client: Client) {}

  /**
   * A checkpoint's state at a commit or a ref's tip: the deltas from its
   * document's commit (the nearest snapshot) joined, and that commit's
   * parent (which a document's PARENT_LINK names).
   */
  readState(at: { ref: string } | { commit: string }): Promise<ReadAnswer> {
    return this.read({ ...at, delta: true, stop: "compaction" });
  }

  /** `POST /v1/read` with its bytes (inline, else downloaded). */
  async read(request: ReadRequest): Promise<ReadAnswer> {
    const got = await this.client.readBytes(request);
    // Only a context read of no commit answers `commit: null`; the saver's
    // reads are of a commit, or delta reads (a 404 for a ref with none).
    if (got.commit === null) throw new CtxError("a read of the saver's answered no commit", { kind: "internal" });
    return { commit: got.commit, parent: got.parent ?? null, bytes: got.bytes };
  }

  /** `GET /v1/artifacts/{art}`: the artifact's bytes, checked against its ref. */
  downloadArtifact(ref: string): Promise<Uint8Array> {
    return this.client.downloadArtifact(ref);
  }

  /** `POST /v1/artifacts`: the artifact's ref. */
  async uploadArtifact(data: Uint8Array): Promise<string> {
    return (await this.client.uploadArtifact(data)).ref;
  }

  /** `POST /v1/commits`: the new commit's id. */
  async checkpoint(commit: BatchCommit): Promise<string> {
    const { created_at, ...rest } = commit;
    const done = await this.client.checkpoint({ ...rest, created_at: created_at ?? undefined });
    return done.id;
  }

  /**
   * `POST /v1/batch`: the ids of its commits, in order, and where each ref
   * it moved points after it (`null`: a skipped move whose ref does not exist).
   */
  async batch(request: {
    commits: BatchCommit[];
    refs: BatchRef[];
    artifacts?: BatchArtifact[];
  }): Promise<{ commits: string[]; refs: (string | null)[] }> {
    const done = await this.client.batch(request);
    return { commits: done.commits.map((c) => c.id), refs: done.refs.map((r) => r?.target ?? null) };
  }

  /** A ref's target, `null` when there is no such ref. */
  async getRef(name: string): Promise<string | null> {
    const rec = await this.client.getRef(name);
    return rec === null ? null : rec.target;
  }

  /** Every ref under `prefix`, a page at a time. */
  async listRefs(prefix: string): Promise<{ name: string; target: string }[]> {
    return (await this.client.listAllRefs(prefix)).map((r) => ({ name: r.name, target: r.target }));
  }

  /** Removes a ref; one already gone is not an error. */
  async deleteRef(name: string): Promise<void> {
    try {
      await this.client.deleteRef(name);
    } catch (e) {
      if (e instanceof CtxError && e.kind === "not_found") return;
      throw e;
    }
  }
}
