// LangGraph's own checkpointer validation suite
// (@langchain/langgraph-checkpoint-validation 1.1.1), run as it ships
// against CtxSaver over the live server: every test of its default suite
// (put, putWrites, getTuple, list, deleteThread), and its opt-in
// getDeltaChannelHistory tests, none skipped.
//
// The suite is used as a library: its CLI (`validate-checkpointer`) cannot
// load any initializer in 1.1.1 (its runner imports a schema and a helper
// that the published bundle does not export). Its specs call vitest's
// globals (`describe`, `it`, `expect`, the hooks), which the CLI turns on
// with `globals: true`; this file provides the same ones.
import * as vitest from "vitest";
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";

import initializer from "./langgraph_initializer.mjs";

const { describe, it, expect, beforeAll, afterAll, beforeEach, afterEach } = vitest;
Object.assign(globalThis, { describe, it, expect, beforeAll, afterAll, beforeEach, afterEach });

validate(initializer);
deltaChannelHistoryTests(initializer);
