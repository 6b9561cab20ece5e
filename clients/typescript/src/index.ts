// ctx-client: a typed client for ctx's v1 API. Framework adapters are
// their own entry points: `ctx-client/claude`, `ctx-client/langgraph`.
export * from "./client.js";
export * from "./errors.js";
export { routes, type OperationId, type components, type operations, type paths } from "./generated.js";
