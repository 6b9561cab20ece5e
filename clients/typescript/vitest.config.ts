import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// The tests talk to a live `ctx serve` (tests/typescript/run starts it and
// exports CTX_TEST_URL and CTX_TEST_TOKEN). The package's own entry points
// resolve to its sources, as the README's lines import them.
const src = (path: string) => fileURLToPath(new URL(`./src/${path}`, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^ctx-client$/, replacement: src("index.ts") },
      { find: /^ctx-client\/claude$/, replacement: src("claude.ts") },
      { find: /^ctx-client\/langgraph$/, replacement: src("langgraph/index.ts") },
    ],
  },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
