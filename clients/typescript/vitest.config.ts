import { defineConfig } from "vitest/config";

// The tests talk to a live `ctx serve` (tests/typescript/run starts it and
// exports CTX_TEST_URL and CTX_TEST_TOKEN).
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
