// The v1 API over `fetch`: every operation of the OpenAPI document by its
// operationId (`client.call("get_ref", { path: { name } })`, typed from
// src/generated.ts), and methods for what the adapters use, each named by
// its operationId in camelCase (`getRef`), but for the conveniences over
// one (`readBytes`, `listAllRefs`).
//
// Node's `fetch` keeps connections alive. A 503 or 429 is retried after
// its `Retry-After` (a connection that could not be opened too: nothing
// was sent); every other error is thrown as the `CtxError` subclass of its
// kind.
import { blake3 } from "@noble/hashes/blake3.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { CtxError, InvalidError, errorFromResponse } from "./errors.js";
import { routes, type OperationId, type components, type operations } from "./generated.js";

export type Schemas = components["schemas"];
export type Commit = Schemas["Commit"];
export type RefRecord = Schemas["RefRecord"];
export type CheckpointRequest = Schemas["CheckpointRequest"];
export type BatchRequest = Schemas["BatchRequest"];
export type BatchResponse = Schemas["BatchResponse"];
export type ReadRequest = Schemas["ReadRequest"];
export type ReadResponse = Schemas["ReadResponse"];

export const DEFAULT_URL = "http://127.0.0.1:7878";
export const VERSION = "0.1.0";
const USER_AGENT = `ctx-client-typescript/${VERSION}`;

/**
 * Above this many bytes a checkpoint's delta leaves its JSON: it is PUT
 * straight to storage first (a presigned URL from `POST /v1/uploads`) and
 * the checkpoint names it. On AWS a request passes API Gateway and Lambda,
 * which carry at most 6 MB, the JSON's base64 of bytes in base64 again.
 */
export const DIRECT_UPLOAD_BYTES = 3 * 1024 * 1024;

// --- what an operation takes and answers, from the generated types -------

type Op<O extends OperationId> = operations[O];
type Params<O extends OperationId> = Op<O>["parameters"];
type PathOf<O extends OperationId> = Params<O> extends { path: infer P } ? P : never;
type QueryOf<O extends OperationId> = Params<O> extends { query?: infer Q } ? Q : never;
type HeadersOf<O extends OperationId> = Params<O> extends { header?: infer H } ? H : never;
type BodyOf<O extends OperationId> = [NonNullable<Op<O>["requestBody"]>] extends [never]
  ? never
  : NonNullable<Op<O>["requestBody"]> extends { content: infer C }
    ? C extends { "application/json": infer J }
      ? J
      : Uint8Array | string
    : never;
type JsonAnswer<R> = R extends { content: { "application/json": infer J } } ? J : never;
type Ok<O extends OperationId> = Op<O>["responses"] extends infer R
  ? { [C in keyof R]: C extends 200 | 201 ? JsonAnswer<R[C]> : never }[keyof R]
  : never;

/** What `call` answers for an operation: its JSON, bytes, text or nothing. */
export type Answer<O extends OperationId> = (typeof routes)[O]["answer"] extends "json"
  ? O extends "openapi_json"
    ? Record<string, unknown>
    : Ok<O>
  : (typeof routes)[O]["answer"] extends "bytes"
    ? Uint8Array
    : (typeof routes)[O]["answer"] extends "text"
      ? string
      : undefined;

/** What `call` takes for an operation: path and query parameters, headers, body. */
export type Args<O extends OperationId> = ([PathOf<O>] extends [never] ? { path?: never } : { path: PathOf<O> }) &
  ([QueryOf<O>] extends [never] | [undefined] ? { query?: never } : { query?: QueryOf<O> }) &
  ([HeadersOf<O>] extends [never] | [undefined] ? { headers?: never } : { headers?: HeadersOf<O> }) &
  ([BodyOf<O>] extends [never] ? { body?: never } : { body: BodyOf<O> });

// --- options ----------------------------------------------------------------

export interface RetryPolicy {
  /** How many times a 429, a 503 or a refused connection is retried. */
  maxRetries: number;
  /** Seconds before the first retry without `Retry-After`, doubling each time. */
  backoff: number;
  /** The longest wait, in seconds, whatever `Retry-After` says. */
  maxDelay: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 4, backoff: 0.2, maxDelay: 30 };

export interface ClientOptions {
  /** The server (default: `CTX_SERVER`, else http://127.0.0.1:7878). */
  url?: string;
  /** The bearer token (default: `CTX_TOKEN`, else `$CTX_DATA/token`, else `.ctx/token`). */
  token?: string | null;
  retry?: Partial<RetryPolicy>;
  /** The `fetch` to send with (default: the global one). */
  fetch?: typeof fetch;
}

/** The server and token the environment names, as the CLI finds them. */
export function fromEnvironment(env: Record<string, string | undefined> = process.env): {
  url: string;
  token: string | null;
} {
  const url = env.CTX_SERVER || DEFAULT_URL;
  let token = env.CTX_TOKEN || null;
  if (token === null) {
    try {
      token = readFileSync(join(env.CTX_DATA || ".ctx", "token"), "utf8").trim() || null;
    } catch {
      token = null;
    }
  }
  return { url, token };
}

// --- helpers ----------------------------------------------------------------

/** `art-` and the BLAKE3 hash of `data`: its artifact reference. */
export function artifactRefOf(data: Uint8Array | string): string {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  return `art-${bytesToHex(blake3(bytes))}`;
}

/** The current time, RFC 3339 UTC. */
export function now(): string {
  return new Date().toISOString();
}

/** `Retry-After` as seconds: delta-seconds or an HTTP date. */
export function retryAfterSeconds(value: string | null): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(seconds, 0);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max((at - Date.now()) / 1000, 0);
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

function isUtf8(data: Uint8Array): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(data);
    return true;
  } catch {
    return false;
  }
}

/** A parameter's value as it goes in a URL or header: a string, number or boolean. */
function scalar(op: string, name: string, value: unknown): string {
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return String(value);
  throw new InvalidError(`${op}: ${name} must be a string, number or boolean`, { kind: "invalid", field: name });
}

/** A connection that could not be opened: nothing reached the server. */
function refused(e: unknown): boolean {
  const cause = (e as { cause?: { code?: string } })?.cause;
  return cause?.code === "ECONNREFUSED";
}

/** The bytes of a read: its inline content, else its artifact downloaded. */
export interface ReadBytes extends ReadResponse {
  bytes: Uint8Array;
}

// --- the client -------------------------------------------------------------

export class Client {
  readonly url: string;
  readonly token: string | null;
  readonly retry: RetryPolicy;
  private readonly send: typeof fetch;

  constructor(options: ClientOptions = {}) {
    const env = fromEnvironment();
    this.url = (options.url ?? env.url).replace(/\/+$/, "");
    this.token = options.token === undefined ? env.token : options.token;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.send = options.fetch ?? fetch;
  }

  /** The URL of an operation, its path parameters filled in. */
  urlOf<O extends OperationId>(op: O, path?: Record<string, unknown>, query?: Record<string, unknown>): string {
    const route = routes[op];
    const keepSlashes: readonly string[] = route.slashes;
    let p: string = route.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const value = path?.[name];
      if (value === undefined || value === null || value === "") {
        throw new InvalidError(`${op} needs its path parameter ${name}`, { kind: "invalid", field: name });
      }
      const text = scalar(op, name, value);
      return keepSlashes.includes(name)
        ? text.split("/").map(encodeURIComponent).join("/")
        : encodeURIComponent(text);
    });
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined && v !== null) q.set(k, scalar(op, k, v));
    }
    const qs = q.toString();
    if (qs) p += `?${qs}`;
    return this.url + p;
  }

  /** Sends one operation of the API and reads its answer. */
  async call<O extends OperationId>(op: O, ...rest: object extends Args<O> ? [Args<O>?] : [Args<O>]): Promise<Answer<O>> {
    const args = (rest[0] ?? {}) as {
      path?: Record<string, unknown>;
      query?: Record<string, unknown>;
      headers?: Record<string, unknown>;
      body?: unknown;
    };
    const route = routes[op];
    const headers: Record<string, string> = { "user-agent": USER_AGENT, accept: "application/json" };
    if (this.token && route.auth) headers.authorization = `Bearer ${this.token}`;
    for (const [k, v] of Object.entries(args.headers ?? {})) {
      if (v !== undefined && v !== null) headers[k.toLowerCase()] = scalar(op, k, v);
    }
    let body: string | Uint8Array | undefined;
    if (route.body === "json") {
      body = JSON.stringify(args.body);
      headers["content-type"] = "application/json";
    } else if (route.body === "bytes" || route.body === "text") {
      body = typeof args.body === "string" ? new TextEncoder().encode(args.body) : (args.body as Uint8Array);
      headers["content-type"] = route.body === "text" ? "text/plain; charset=utf-8" : "application/octet-stream";
    }
    const resp = await this.request(route.method, this.urlOf(op, args.path, args.query), headers, body);
    switch (route.answer) {
      case "json":
        return (await resp.json()) as Answer<O>;
      case "bytes":
        return new Uint8Array(await resp.arrayBuffer()) as Answer<O>;
      case "text":
        return (await resp.text()) as Answer<O>;
      default:
        await resp.arrayBuffer();
        return undefined as Answer<O>;
    }
  }

  /** One request, retried on 429, 503 and a refused connection; a `CtxError` on failure. */
  async request(method: string, url: string, headers: Record<string, string>, body?: string | Uint8Array): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      let resp: Response;
      try {
        resp = await this.send(url, { method, headers, body, redirect: "follow" });
      } catch (e) {
        if (refused(e) && attempt < this.retry.maxRetries) {
          await sleep(this.delay(attempt));
          continue;
        }
        throw new CtxError(`${method} ${url}: ${(e as Error).message}`, { kind: "unavailable" });
      }
      if (resp.ok) return resp;
      const retryAfter = retryAfterSeconds(resp.headers.get("retry-after"));
      const data = new Uint8Array(await resp.arrayBuffer());
      if ((resp.status === 429 || resp.status === 503) && attempt < this.retry.maxRetries) {
        await sleep(this.delay(attempt, retryAfter));
        continue;
      }
      throw errorFromResponse(resp.status, data, retryAfter);
    }
  }

  /** Seconds to wait before retry number `attempt` (0-based). */
  delay(attempt: number, retryAfter?: number): number {
    if (retryAfter !== undefined) return Math.min(Math.max(retryAfter, 0), this.retry.maxDelay);
    return Math.min(this.retry.backoff * 2 ** attempt, this.retry.maxDelay);
  }

  // --- named methods ---------------------------------------------------------

  /** `GET /healthz`. */
  healthz(): Promise<string> {
    return this.call("healthz");
  }

  /** `POST /v1/artifacts`: raw bytes, idempotent. */
  uploadArtifact(data: Uint8Array | string): Promise<Schemas["ArtifactInfo"]> {
    return this.call("upload_artifact", { body: data });
  }

  /**
   * `GET /v1/artifacts/{art}`, the bytes checked against the ref (a large
   * artifact comes straight from storage, by a 303 followed).
   */
  async downloadArtifact(artifactRef: string): Promise<Uint8Array> {
    const data = await this.call("download_artifact", { path: { art: artifactRef } });
    const got = artifactRefOf(data);
    if (got !== artifactRef) {
      throw new CtxError(`the bytes downloaded for ${artifactRef} hash to ${got}`, { kind: "internal", field: "art" });
    }
    return data;
  }

  /**
   * `POST /v1/commits`. `created_at` defaults to now. A delta over
   * `DIRECT_UPLOAD_BYTES` is PUT to storage first where the server hands
   * out upload URLs (AWS), and sent inline where it does not (embedded).
   */
  async checkpoint(request: Omit<CheckpointRequest, "created_at"> & { created_at?: string }): Promise<Commit> {
    const body: CheckpointRequest = { ...request, created_at: request.created_at ?? now() };
    const large = largeDelta(body);
    if (large !== undefined) {
      const ref = artifactRefOf(large);
      if (await this.uploadDirect(ref, large)) {
        const { delta: _d, delta_base64: _b, ...rest } = body;
        return this.call("checkpoint", { body: { ...rest, artifact_ref: ref } });
      }
    }
    return this.call("checkpoint", { body });
  }

  /** PUTs `data` to a presigned URL; `false` when the server hands out none. */
  private async uploadDirect(artifactRef: string, data: Uint8Array): Promise<boolean> {
    let upload: Schemas["PresignedUpload"];
    try {
      upload = await this.call("upload_url", { body: { artifact_ref: artifactRef, size: data.length } });
    } catch (e) {
      if (e instanceof CtxError && e.status === 400 && e.field === "body") return false;
      throw e;
    }
    const resp = await this.send(upload.url, { method: "PUT", headers: upload.headers ?? {}, body: data });
    if (!resp.ok) throw errorFromResponse(resp.status, new Uint8Array(await resp.arrayBuffer()));
    return true;
  }

  /** `POST /v1/batch`: commits, ref moves and inline artifacts in one atomic write. */
  batch(request: BatchRequest): Promise<BatchResponse> {
    return this.call("batch", { body: request });
  }

  /** `POST /v1/read`: a context or delta read in one request. */
  read(request: ReadRequest): Promise<ReadResponse> {
    return this.call("read", { body: request });
  }

  /** `POST /v1/read`, with its bytes: inline when small, else downloaded. */
  async readBytes(request: ReadRequest): Promise<ReadBytes> {
    const got = await this.read(request);
    let bytes: Uint8Array;
    if (typeof got.content === "string") bytes = new TextEncoder().encode(got.content);
    else if (typeof got.content_base64 === "string") bytes = Uint8Array.from(Buffer.from(got.content_base64, "base64"));
    else bytes = await this.downloadArtifact(got.artifact_ref);
    return { ...got, bytes };
  }

  /** `GET /v1/commits/{ctx}`. */
  getCommit(commit: string): Promise<Commit> {
    return this.call("get_commit", { path: { ctx: commit } });
  }

  /** `GET /v1/refs/{name}`; `null` when there is no such ref. */
  async getRef(name: string): Promise<RefRecord | null> {
    try {
      return await this.call("get_ref", { path: { name } });
    } catch (e) {
      if (e instanceof CtxError && e.kind === "not_found") return null;
      throw e;
    }
  }

  /** `PUT /v1/refs/{name}`: by compare-and-swap on `expected` (`null`: must not exist). */
  setRef(name: string, target: string, expected: string | null = null): Promise<RefRecord> {
    return this.call("set_ref", { path: { name }, body: { target, expected } });
  }

  /** `DELETE /v1/refs/{name}` (by compare-and-swap when `expected` is given). */
  deleteRef(name: string, expected?: string): Promise<Answer<"delete_ref">> {
    return this.call("delete_ref", { path: { name }, query: expected === undefined ? {} : { expected } });
  }

  /** `GET /v1/refs?prefix=`: the refs under a prefix, at most `limit`, after `after` when given. */
  async listRefs(prefix?: string, limit?: number, after?: string): Promise<RefRecord[]> {
    const got = await this.call("list_refs", { query: { prefix, limit, after } });
    return got.refs;
  }

  /** Every ref under a prefix, `page` at a time (each full page's `next` starts the next). */
  async listAllRefs(prefix?: string, page = 1000): Promise<RefRecord[]> {
    const out: RefRecord[] = [];
    let after: string | undefined;
    for (;;) {
      const got = await this.call("list_refs", { query: { prefix, limit: page, after } });
      out.push(...got.refs);
      if (!got.next) return out;
      after = got.next;
    }
  }
}

/** The delta of a checkpoint request when it is over `DIRECT_UPLOAD_BYTES`. */
function largeDelta(body: CheckpointRequest): Uint8Array | undefined {
  if (typeof body.delta_base64 === "string" && (body.delta_base64.length * 3) / 4 > DIRECT_UPLOAD_BYTES) {
    return Uint8Array.from(Buffer.from(body.delta_base64, "base64"));
  }
  if (typeof body.delta === "string" && body.delta.length * 4 > DIRECT_UPLOAD_BYTES) {
    const data = new TextEncoder().encode(body.delta);
    return data.length > DIRECT_UPLOAD_BYTES ? data : undefined;
  }
  return undefined;
}

/** A delta as the checkpoint request carries it: UTF-8 text, else base64. */
export function deltaFields(data: Uint8Array | string): { delta: string } | { delta_base64: string } {
  if (typeof data === "string") return { delta: data };
  return isUtf8(data) ? { delta: new TextDecoder().decode(data) } : { delta_base64: Buffer.from(data).toString("base64") };
}
