// The initializer LangGraph's checkpointer validation suite
// (@langchain/langgraph-checkpoint-validation) takes: CtxSaver over the live
// server tests/typescript/run started (CTX_TEST_URL, CTX_TEST_TOKEN). Each
// checkpointer the suite creates writes under a prefix of its own, and its
// refs are deleted when the suite destroys it, so the suite's fixed thread
// ids ("1", "thread-1") never see another checkpointer's checkpoints.
//
// The suite's CLI (`validate-checkpointer`) cannot load an initializer in
// 1.1.1; langgraph_validation.test.ts runs the suite inside vitest instead.
import { randomUUID } from "node:crypto";

import type { CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";

import { Client } from "../src/client.js";
import { CtxSaver } from "../src/langgraph/index.js";

function server(): { url: string; token: string } {
  const url = process.env.CTX_TEST_URL;
  const token = process.env.CTX_TEST_TOKEN;
  if (!url || !token) {
    throw new Error("CtxSaver's validation needs a live ctx serve: set CTX_TEST_URL and CTX_TEST_TOKEN (tests/typescript/run does)");
  }
  return { url, token };
}

/** Every ref a saver wrote under its prefix, deleted. */
export async function dropPrefix(client: Client, prefix: string): Promise<void> {
  for (;;) {
    const refs = await client.listRefs(`${prefix}/`, 1000);
    if (refs.length === 0) return;
    await Promise.all(refs.map((r) => client.deleteRef(r.name)));
  }
}

const initializer: CheckpointSaverTestInitializer<CtxSaver> = {
  checkpointerName: "ctx-client CtxSaver",
  beforeAll() {
    server();
  },
  createCheckpointer() {
    const client = new Client(server());
    return new CtxSaver(client, { prefix: `lgv-${randomUUID().slice(0, 8)}` });
  },
  async destroyCheckpointer(saver) {
    await dropPrefix(new Client(server()), saver.names.prefix);
  },
};

export default initializer;
