/**
 * LangGraph.js checkpoints on ctx: {@link CtxSaver}, a `BaseCheckpointSaver`
 * (ADR 0008, docs/adr/0008-langgraph-checkpoints.md).
 *
 * Layout: `saver` (the checkpointer), `api` (the calls it makes over the
 * typed client), `document` (the checkpoint document's encodings), `names`
 * (ref names), `cache` (a bounded cache of immutable things), `serde` (the
 * default serializer: plain data, LangChain's messages, LangGraph's own
 * records and the types the saver is given; any other type refused).
 */
export { CtxSaver, type CtxSaverOptions } from "./saver.js";
export {
  CheckpointDecodeError,
  DEFAULT_ALLOWED_TYPES,
  DisallowedTypeError,
  StrictSerializer,
  type AllowedType,
} from "./serde.js";
