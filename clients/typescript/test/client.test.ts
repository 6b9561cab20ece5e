// The client against a live ctx serve: the routes the adapters use, every
// operation reachable by its operationId, and errors as the API's kinds.
import { describe, expect, test } from "vitest";

import { Client, DIRECT_UPLOAD_BYTES, artifactRefOf, deltaFields, routes } from "../src/index.js";
import { ConflictError, CtxError, InvalidError, NotFoundError, UnauthenticatedError } from "../src/errors.js";
import { client, live, unique } from "./live.js";

const TRANSCRIPT = [
  '{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}\n',
  '{"type":"assistant","uuid":"a1","message":{"role":"assistant","content":[{"type":"text","text":"hello"}]}}\n',
];

/** A commit of the tests: a delta checkpoint by `principal` in `format`, and `extra`. */
function commit(principal: string, format: string, extra: Record<string, unknown>) {
  return {
    principal,
    template: "ts-test",
    format,
    commit_type: "delta" as const,
    checkpoint: "turn_boundary" as const,
    created_at: new Date().toISOString(),
    ...extra,
  };
}

describe("the client", () => {
  test("health and the OpenAPI document", async () => {
    const c = client();
    expect(await c.healthz()).toBe("ok");
    const doc = await c.call("openapi_json", { query: { all: true } });
    const ids = Object.values((doc as { paths: Record<string, Record<string, { operationId: string }>> }).paths).flatMap(
      (item) => Object.values(item).map((op) => op.operationId),
    );
    expect(ids.sort()).toEqual(Object.keys(routes).sort());
  });

  test("a chain of checkpoints, read back, refs moved by compare-and-swap", async () => {
    const c = client();
    const name = unique();
    const ref = `sessions/${name}`;
    // Seed 000's fresh start: a read of no commit, and of the session's
    // ref before its first checkpoint, is the empty context, not a 404.
    const fresh = await c.readBytes({ commit: null, format: "anthropic-messages-v1" });
    expect([fresh.commit, new TextDecoder().decode(fresh.bytes), fresh.message_count]).toEqual([null, "[]", 0]);
    const first = await c.readBytes({ ref });
    expect([first.commit, first.bytes.length, first.message_count]).toEqual([null, 0, 0]);
    const wrong = await c.read({ commit: "ctx-00000000000000000000000000000000" }).catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(NotFoundError);
    expect((wrong as NotFoundError).field).toBe("commit");
    const root = await c.checkpoint({
      principal: name,
      template: "ts-test",
      format: "claude-code-v1",
      commit_type: "delta",
      checkpoint: "turn_boundary",
      delta: TRANSCRIPT[0],
      ref: { name: ref, expected: first.commit },
      session_id: name,
    });
    expect(root.id).toMatch(/^ctx-[0-9a-f]{32}$/);
    const next = await c.checkpoint({
      principal: name,
      template: "ts-test",
      format: "claude-code-v1",
      commit_type: "delta",
      checkpoint: "turn_boundary",
      ...deltaFields(TRANSCRIPT[1]!),
      parent: root.id,
      ref: { name: ref, expected: root.id },
      session_id: name,
    });
    expect(next.parent).toBe(root.id);
    expect((await c.getRef(ref))?.target).toBe(next.id);

    const read = await c.readBytes({ ref });
    expect(read.commit).toBe(next.id);
    expect(new TextDecoder().decode(read.bytes)).toBe(TRANSCRIPT.join(""));
    const own = await c.readBytes({ commit: next.id, delta: true });
    expect(new TextDecoder().decode(own.bytes)).toBe(TRANSCRIPT[1]);
    expect(own.parent).toBe(root.id);

    const history = await c.call("history", { path: { ctx: next.id }, query: { depth: 10 } });
    expect(history.commits.map((x) => x.id)).toEqual([next.id, root.id]);

    // A stale compare-and-swap: a 409 naming where the ref is now.
    const lost = await c.setRef(ref, root.id, root.id).catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(ConflictError);
    expect((lost as ConflictError).current).toBe(next.id);
    expect((lost as ConflictError).status).toBe(409);

    expect((await c.listRefs(`sessions/${name}`)).map((r) => r.name)).toEqual([ref]);
    // Pages: five more refs, listed two at a time.
    const more = ["a", "b", "c", "d", "e"].map((x) => `${ref}/${x}`);
    for (const m of more) await c.setRef(m, next.id);
    expect((await c.listAllRefs(`${ref}/`, 2)).map((r) => r.name)).toEqual(more);
    expect((await c.listRefs(`${ref}/`, 2, more[1])).map((r) => r.name)).toEqual(more.slice(2, 4));
    for (const m of more) await c.deleteRef(m);
    await c.deleteRef(ref, next.id);
    expect(await c.getRef(ref)).toBeNull();
  });

  test("a batch writes its commits, inline artifacts and ref moves at once", async () => {
    const c = client();
    const name = unique();
    const loose = new Uint8Array([0, 255, 1, 2, 3]);
    const got = await c.batch({
      artifacts: [
        { ref: artifactRefOf(TRANSCRIPT[0]!), text: TRANSCRIPT[0] },
        { ref: artifactRefOf(loose), base64: Buffer.from(loose).toString("base64") },
      ],
      commits: [
        commit(name, "claude-code-v1", { artifact_ref: artifactRefOf(TRANSCRIPT[0]!) }),
        commit(name, "claude-code-v1", { delta: TRANSCRIPT[1], parent_in_batch: 0 }),
      ],
      refs: [{ name: `sessions/${name}`, target_in_batch: 1, expected: null }],
    });
    expect(got.commits[1]!.parent).toBe(got.commits[0]!.id);
    expect(got.refs[0]!.target).toBe(got.commits[1]!.id);
    expect(await c.downloadArtifact(artifactRefOf(loose))).toEqual(loose);

    // A stale ref: a 409 naming the field, and nothing of the batch written.
    const stale = await c
      .batch({
        commits: [commit(name, "raw", { delta: "never" })],
        refs: [{ name: `sessions/${name}`, target_in_batch: 0, expected: got.commits[0]!.id }],
      })
      .catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(ConflictError);
    expect((stale as CtxError).field).toBe("refs[0].expected");
    expect((await c.getRef(`sessions/${name}`))?.target).toBe(got.commits[1]!.id);
  });

  test("errors carry the API's kind, status and field", async () => {
    const c = client();
    const bad = await c
      .checkpoint({ principal: "", template: "t", format: "raw", commit_type: "delta", checkpoint: "turn_boundary", delta: "x" })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(InvalidError);
    expect((bad as CtxError).status).toBe(400);
    expect((bad as CtxError).field).toBe("principal");

    const missing = await c.getCommit(`ctx-${"0".repeat(32)}`).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect((missing as CtxError).kind).toBe("not_found");

    for (const token of [null, "not-a-token"]) {
      const anon = new Client({ url: live().url, token });
      const denied = await anon.listRefs().catch((e: unknown) => e);
      expect(denied).toBeInstanceOf(UnauthenticatedError);
      expect((denied as CtxError).status).toBe(401);
    }

    // A missing path parameter is the client's own 'invalid', before any request.
    await expect(c.getCommit("")).rejects.toMatchObject({ kind: "invalid", field: "ctx" });
  });

  test("a ref name's slashes stay in its path", async () => {
    const c = client();
    const name = `deep/${unique()}/a.b_c-d/e`;
    const commit = await c.checkpoint({
      principal: "ts",
      template: "ts-test",
      format: "raw",
      commit_type: "delta",
      checkpoint: "turn_boundary",
      delta: "x",
      ref: { name, expected: null },
    });
    expect(await c.getRef(name)).toMatchObject({ name, target: commit.id });
  });

  test("a delta over the direct-upload size goes to storage first on AWS, inline where there is none", async () => {
    const c = client();
    const big = "x".repeat(DIRECT_UPLOAD_BYTES + 1);
    const commit = await c.checkpoint({
      principal: "ts",
      template: "ts-test",
      format: "raw",
      commit_type: "delta",
      checkpoint: "turn_boundary",
      delta: big,
    });
    expect(commit.artifact_ref).toBe(artifactRefOf(big));
    expect(commit.artifact_size).toBe(big.length);
    // Over the inline read size, the bytes are downloaded (on AWS by a 303 to S3), and checked.
    const read = await c.readBytes({ commit: commit.id, delta: true });
    expect(read.content ?? null).toBeNull();
    expect(read.bytes.length).toBe(big.length);
  });
});
