// A client whose requests are counted, each named by its operationId (as
// the Python tests' CountingTransport names them).
import { routes, type OperationId } from "../src/generated.js";
import type { Client } from "../src/client.js";
import { client } from "./live.js";

const MATCHERS: [OperationId, string, RegExp][] = (Object.keys(routes) as OperationId[]).map((op) => {
  const r = routes[op];
  const keepSlashes: readonly string[] = r.slashes;
  const pattern = r.path.replace(/\{([^}]+)\}/g, (_, name: string) => (keepSlashes.includes(name) ? ".+" : "[^/]+"));
  return [op, r.method, new RegExp(`^${pattern}$`)];
});

/** The operation a request is, by its method and path. */
export function operationOf(method: string, url: string): string {
  const path = new URL(url).pathname;
  // The most specific route first: fewer parameters win (`/v1/refs/{name}/evict` over `/v1/refs/{name}`).
  const hits = MATCHERS.filter(([, m, re]) => m === method && re.test(path));
  hits.sort((a, b) => a[2].source.split(".+").length - b[2].source.split(".+").length || b[2].source.length - a[2].source.length);
  return hits[0]?.[0] ?? `${method} ${path}`;
}

export interface Counted {
  client: Client;
  /** The operations sent since `mark()`. */
  since: (mark: number) => string[];
  mark: () => number;
  /** The operations `op` sent, in order. */
  sent: (op: () => Promise<unknown>) => Promise<string[]>;
}

export function counted(): Counted {
  const seen: string[] = [];
  const fetchCounting: typeof fetch = (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    seen.push(operationOf(init?.method ?? "GET", url));
    return fetch(input, init);
  };
  const c = client({ fetch: fetchCounting });
  const mark = () => seen.length;
  const since = (m: number) => seen.slice(m);
  return {
    client: c,
    mark,
    since,
    sent: async (op) => {
      const m = mark();
      await op();
      return since(m);
    },
  };
}
