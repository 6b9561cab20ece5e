// The context browser's speed on a long session, in headless chromium,
// against the server tests/ui/run --bench started: a session of --commits
// commits (default 10,000) whose transcript is --bytes long (default 5 MB,
// Claude Code JSONL, every commit a user or assistant turn), written by
// POST /v1/batch, 14 commits a request. Each view is opened --runs times
// in a fresh tab (the token already in the tab, as after sign-in):
// - chain view: navigation until the view is ready (its first page of
//   commits listed, keyboard-navigable);
// - commit view: navigation until a commit's metadata and delta are shown;
// - whole context: from the click on "Show the whole context" (from the
//   root, the whole transcript) until its first turns are painted, and
//   until every turn is in the page.
// Prints the medians beside the limits (300, 200 and 500 ms).
import { parseArgs } from "node:util";
import puppeteer from "puppeteer-core";

import { client } from "./seed.mjs";

const { values } = parseArgs({
  options: {
    commits: { type: "string", default: "10000" },
    bytes: { type: "string", default: "5000000" },
    runs: { type: "string", default: "5" },
    refs: { type: "string", default: "100000" },
  },
});
const refCount = Number(values.refs);
const commits = Number(values.commits);
const bytes = Number(values.bytes);
const runs = Number(values.runs);
const url = process.env.CTX_TEST_URL;
const token = process.env.CTX_TEST_TOKEN;
const api = client(url, token);

// --- the session ----------------------------------------------------------------

const sid = "0f6a1c2e-bench-4000-8000-000000000001";
const ref = `claude/-home-dev-bench/${sid}`;
const per = Math.max(200, Math.floor(bytes / commits));
const filler = "The agent reads the file, weighs the next tool call and writes down what it found. ";

function entry(i) {
  const role = i % 2 ? "assistant" : "user";
  const base = { type: role, uuid: `bench-${i}`, parentUuid: i ? `bench-${i - 1}` : null, sessionId: sid, timestamp: new Date(Date.UTC(2026, 10, 27, 0, 0, 0, i * 10)).toISOString() };
  const head = JSON.stringify({ ...base, message: { role, content: "" } }).length;
  const text = `turn ${i}: ${filler.repeat(Math.ceil(per / filler.length))}`.slice(0, Math.max(per - head - 1, 10));
  return JSON.stringify({ ...base, message: { role, content: role === "user" ? text : [{ type: "text", text }] } }) + "\n";
}

const t0 = performance.now();
let tip = null;
let total = 0;
let ids = [];
for (let i = 0; i < commits; i += 14) {
  const batch = [];
  for (let j = i; j < Math.min(i + 14, commits); j++) {
    const delta = entry(j);
    total += Buffer.byteLength(delta);
    batch.push({
      commit_type: "delta",
      format: "claude-code-v1",
      template: "bench",
      principal: "bench",
      checkpoint: "turn_boundary",
      created_at: new Date(Date.UTC(2026, 10, 27, 0, 0, 0, j * 10)).toISOString(),
      delta,
      session_id: sid,
      summary: `turn ${j}`,
      ...(j === i ? { parent: tip } : { parent_in_batch: j - i - 1 }),
    });
  }
  const done = await api("POST", "/v1/batch", { commits: batch, refs: [{ name: ref, expected: tip, target_in_batch: batch.length - 1 }] });
  tip = done.commits[done.commits.length - 1].id;
  ids.push(done.commits[0].id);
}
const seeded = performance.now() - t0;
const middle = ids[Math.floor(ids.length / 2)];

// --refs refs under one prefix, all on the tip: 93 ref moves and one commit a batch
// (7 × commits + refs ≤ 100).
const refName = (i) => `bench-refs/r${String(i).padStart(7, "0")}`;
const t1 = performance.now();
for (let i = 0; i < refCount; i += 93) {
  const refs = [];
  for (let j = i; j < Math.min(i + 93, refCount); j++) refs.push({ name: refName(j), target: tip, expected: null });
  await api("POST", "/v1/batch", { refs });
}
const refsSeeded = performance.now() - t1;

// --- the browser -----------------------------------------------------------------

const browser = await puppeteer.launch({
  executablePath: process.env.CTX_CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  defaultViewport: { width: 1280, height: 800 },
});

async function tab() {
  const page = await browser.newPage();
  await page.evaluateOnNewDocument((t) => sessionStorage.setItem("ctx.token", t), token);
  return page;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function navigation(path) {
  const times = [];
  for (let r = 0; r < runs; r++) {
    const page = await tab();
    const start = performance.now();
    await page.goto(url + path);
    await page.waitForSelector("#view[data-ready=true]");
    times.push(performance.now() - start);
    await page.close();
  }
  return times;
}

const chain = await navigation(`/ui/chain?ref=${encodeURIComponent(ref)}`);
const firstRefs = await navigation(`/ui?prefix=bench-refs/`);
const deepRefs = await navigation(`/ui?prefix=bench-refs/&after=${encodeURIComponent(refName(Math.max(refCount - 150, 0)))}`);
const commit = await navigation(`/ui/commit/${middle}`);
const first = [];
const all = [];
for (let r = 0; r < runs; r++) {
  const page = await tab();
  await page.goto(`${url}/ui/commit/${tip}`);
  await page.waitForSelector("#view[data-ready=true]");
  await page.select("#stop", "root");
  const start = performance.now();
  await page.click("#show-context");
  await page.waitForFunction(() => document.querySelector("section[aria-label='The whole context'] .turn"), { polling: "raf" });
  first.push(performance.now() - start);
  await page.waitForFunction((n) => document.querySelectorAll("section[aria-label='The whole context'] .turn").length >= n, { polling: 50, timeout: 120_000 }, commits);
  all.push(performance.now() - start);
  await page.close();
}
await browser.close();

const row = (name, xs, limit) => `| ${name} | ${median(xs).toFixed(0)} | ${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)} | ${limit} |`;
console.log(`A session of ${commits.toLocaleString("en")} commits, ${total.toLocaleString("en")} bytes of transcript (seeded in ${(seeded / 1000).toFixed(1)} s), ${runs} runs each`);
console.log("| view | median ms | range ms | limit ms |");
console.log("|---|---:|---:|---:|");
console.log(row(`refs view, first page of ${refCount.toLocaleString("en")} refs (seeded in ${(refsSeeded / 1000).toFixed(1)} s)`, firstRefs, "—"));
console.log(row("refs view, a page near the end (after=)", deepRefs, "—"));
console.log(row("chain view, ready", chain, 300));
console.log(row("commit view, ready", commit, 200));
console.log(row("whole context from the root, first turns painted", first, 500));
console.log(row("whole context from the root, every turn in the page", all, "—"));
