#!/usr/bin/env bash
# Compiles bench/langgraph.ts (with the package's tsconfig) into
# node_modules/.cache/ctx-bench and runs it; the arguments go to the bench:
#   bench/langgraph.sh [--ctx path/to/ctx] [--turns 100] [--loads 20]
set -euo pipefail
pkg="$(cd "$(dirname "$0")/.." && pwd)"
out="$pkg/node_modules/.cache/ctx-bench"
rm -rf "$out"
(cd "$pkg" && npx --no-install tsc -p tsconfig.json --noEmit false --declaration false --sourceMap false --outDir "$out")
# The plain-JS helper it imports, beside it as it is in the source tree.
mkdir -p "$out/tools" && cp "$pkg/tools/serve.mjs" "$out/tools/"
# Node takes the compiled files as ES modules only under a package.json that says so.
echo '{"type": "module"}' >"$out/package.json"
exec node "$out/bench/langgraph.js" "$@"
