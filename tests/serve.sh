# Sourced by the suites that run against a live `ctx serve` (tests/python/run,
# tests/typescript/run, tests/ui/run, tests/schemathesis/run). `ctx_serve STORE CTX WORK PREFIX` starts the server
# on a free port of 127.0.0.1 with its data in WORK/data, waits until it
# listens, and exports CTX_TEST_URL, CTX_TEST_TOKEN, CTX_TEST_STORE,
# CTX_TEST_DATA (its data directory, which ctx in the process can open
# beside it) and CTX_SERVE_PID. On the aws store the emulator must be running (CTX_TABLE
# and the endpoints in the environment); the server then runs as the
# Lambdas do, with no hot cache (a large download always answers 303 to
# S3), and the token is for a tenant of this run alone (the emulator's
# table is shared). The caller kills CTX_SERVE_PID when it is done.
ctx_serve() {
  local store="$1" ctx="$2" work="$3" prefix="$4"
  if [ "$store" = aws ] && [ -z "${CTX_TABLE:-}" ]; then
    echo "$prefix: --store aws needs the emulator: eval \"\$(localstack/emulator start)\" first" >&2; return 1
  fi
  : >"$work/serve.out"
  local hot=()
  [ "$store" = aws ] && hot=(env CTX_HOT_CACHE_BYTES=0)
  "${hot[@]}" "$ctx" serve --store "$store" --data "$work/data" --addr 127.0.0.1:0 >>"$work/serve.out" 2>"$work/serve.err" &
  CTX_SERVE_PID=$!
  export CTX_SERVE_PID
  local url=""
  for _ in $(seq 1 300); do
    url="$(sed -n 's/^ctx listening on \(http:[^ ]*\)$/\1/p' "$work/serve.out")"
    [ -n "$url" ] && break
    if ! kill -0 "$CTX_SERVE_PID" 2>/dev/null; then
      echo "$prefix: ctx serve exited:" >&2; cat "$work/serve.err" >&2; return 1
    fi
    sleep 0.1
  done
  if [ -z "$url" ]; then echo "$prefix: ctx serve did not start listening" >&2; return 1; fi
  export CTX_TEST_URL="$url" CTX_TEST_STORE="$store" CTX_TEST_DATA="$work/data"
  if [ "$store" = aws ]; then
    CTX_TEST_TOKEN="$("$ctx" tokens add "$prefix-$$-$(date +%s%N)" --data "$work/data")"
  else
    CTX_TEST_TOKEN="$(cat "$work/data/token")"
  fi
  export CTX_TEST_TOKEN
  echo "$prefix: ctx serve --store $store at $url" >&2
}
