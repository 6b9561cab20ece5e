/**
 * LangGraph.js checkpoints on ctx: {@link CtxSaver}, a `BaseCheckpointSaver`
 * (ADR 0008, docs/adr/0008-langgraph-checkpoints.md).
 *
 * Layout: `saver` (the checkpointer), `api` (the calls it makes over the
 * typed client), `document` (the checkpoint document's encodings), `names`
 * (ref names), `cache` (a bounded cache of immutable things).
 */
export { CtxSaver, type CtxSaverOptions } from "./saver.js";
