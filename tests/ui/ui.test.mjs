// The context browser (/ui) in a real headless browser: Debian's chromium,
// driven by puppeteer-core, against the live `ctx serve` tests/ui/run
// started (CTX_TEST_URL, CTX_TEST_TOKEN; CTX_TEST_OTHER_TOKEN is another
// tenant's). Each view is driven as a user would, and axe-core checks it
// for serious accessibility violations.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { after, before, describe, test } from "node:test";
import puppeteer from "puppeteer-core";

import { client, localInput, seed } from "./seed.mjs";

const URL_ = process.env.CTX_TEST_URL;
const TOKEN = process.env.CTX_TEST_TOKEN;
const OTHER = process.env.CTX_TEST_OTHER_TOKEN;
const CHROMIUM = process.env.CTX_CHROMIUM ?? "/usr/bin/chromium";
assert.ok(URL_ && TOKEN && OTHER, "run with tests/ui/run: it starts the server and sets CTX_TEST_URL, CTX_TEST_TOKEN, CTX_TEST_OTHER_TOKEN");
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

let browser;
let data;
let other;

before(async () => {
  data = await seed(client(URL_, TOKEN), "main");
  other = await seed(client(URL_, OTHER), "othr", { turns: 2 });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // As root in a container chromium needs --no-sandbox; the page is ours.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    defaultViewport: { width: 1280, height: 800 },
  });
});

after(async () => {
  await browser?.close();
});

/** A new tab on `path`, signed in with `token` (typed into the sign-in form, as a user does). */
async function open(path, token = TOKEN) {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.errors = errors;
  await page.goto(URL_ + path);
  if (token) {
    await page.waitForSelector("#login:not([hidden])");
    await page.type("#token", token);
    await Promise.all([page.click("#login button[type=submit]"), page.waitForSelector("#view[data-ready=true]")]);
  }
  return page;
}

async function ready(page) {
  await page.waitForSelector("#view[data-ready=true]");
}

async function go(page, path) {
  await page.evaluate((p) => {
    history.pushState(null, "", p);
    window.dispatchEvent(new PopStateEvent("popstate"));
  }, path);
  await ready(page);
}

const text = (page, sel) => page.$eval(sel, (el) => el.textContent);

/** axe-core in the page: no serious or critical violations. */
async function accessible(page, name) {
  await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => `${v.id}: ${v.help} (${v.nodes.length})`);
  });
  assert.deepEqual(found, [], `${name}: ${found.join("; ")}`);
}

describe("the context browser", () => {
  test("without a token it asks for one; a wrong one is refused with the API's words; the token never goes in a URL", async () => {
    const page = await open("/ui", null);
    await page.waitForSelector("#login:not([hidden])");
    assert.equal(await page.$eval("#view", (el) => el.hidden), true);
    await page.type("#token", "not-a-token");
    await page.click("#login button[type=submit]");
    await page.waitForSelector("#login-error:not([hidden])");
    assert.match(await text(page, "#login-error"), /^401 unauthenticated: /);
    await page.$eval("#token", (el) => (el.value = ""));
    await page.type("#token", TOKEN);
    await Promise.all([page.click("#login button[type=submit]"), ready(page)]);
    assert.ok(!page.url().includes(TOKEN));
    assert.equal(await page.$eval("#login", (el) => getComputedStyle(el).display), "none");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("ctx.token")), TOKEN);
    assert.equal(await page.evaluate(() => localStorage.length), 0);
    await accessible(page, "sign-in");
    // Forget: back to the form, the token gone from the tab.
    await page.click("#forget");
    await page.waitForSelector("#login:not([hidden])");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("ctx.token")), null);
    await page.close();
  });

  test("sessions and refs: newest activity first, with principal, summary, depth, messages and tokens; filters", async () => {
    const page = await open("/ui?prefix=claude/-home-dev-demo-main");
    const rows = await page.$$eval("tbody tr", (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    assert.equal(rows.length, 2);
    // Both refs moved in this run: newest activity first (checked below).
    const names = rows.map((r) => r[0]);
    assert.deepEqual(new Set(names), new Set([data.ref, data.forkRef]));
    const main = rows.find((r) => r[0] === data.ref);
    assert.equal(main[1], data.principal);
    assert.equal(main[3], String(data.compaction.depth));
    assert.equal(main[4], String(data.compaction.message_count));
    const updated = rows.map((r) => Date.parse(r[6]));
    assert.ok(updated[0] >= updated[1]);
    await accessible(page, "refs");
    // A principal filter, typed into the form, keeps only its sessions.
    await page.type("input[name=principal]", "bob-main");
    await Promise.all([page.click("form.filters button[type=submit]"), page.waitForFunction(() => /principal=bob-main/.test(location.search) && document.querySelector("#view[data-ready=true]"))]);
    assert.match(await page.evaluate(() => location.search), /prefix=claude%2F-home-dev-demo-main/);
    const only = await page.$$eval("tbody tr td:first-child", (tds) => tds.map((td) => td.textContent));
    assert.deepEqual(only, [data.forkRef]);
    // Pages: one ref a page, by name, with a link to the next.
    await go(page, `/ui?prefix=claude/-home-dev-demo-main&limit=1`);
    const first = await page.$$eval("tbody tr td:first-child", (tds) => tds.map((td) => td.textContent));
    assert.equal(first.length, 1);
    const nextLink = (await page.$$("nav[aria-label=Pages] a")).at(-1);
    await Promise.all([nextLink.click(), page.waitForFunction(() => /after=/.test(location.search) && document.querySelector("#view[data-ready=true]"))]);
    const second = await page.$$eval("tbody tr td:first-child", (tds) => tds.map((td) => td.textContent));
    assert.equal(second.length, 1);
    assert.deepEqual(new Set([...first, ...second]), new Set([data.ref, data.forkRef]));
    await page.close();
  });

  test("chain: summaries or summarizing…, the compaction and the fork marked, keyboard navigation", async () => {
    const page = await open(`/ui/chain?ref=${encodeURIComponent(data.ref)}`);
    const items = await page.$$eval("ol.chain li", (lis) => lis.map((li) => ({ id: li.dataset.id, text: li.textContent, kind: li.className })));
    assert.equal(items.length, data.commits.length + 1);
    assert.equal(items[0].id, data.compaction.id);
    assert.match(items[0].kind, /compaction/);
    assert.match(items[0].text, /compaction/);
    // The last turn had no summary: it says so.
    assert.match(items[1].text, /summarizing…/);
    assert.match(items[2].text, /Turn 2: read config\.toml/);
    await accessible(page, "chain");
    // Keyboard: focus the list, move down twice with ArrowDown and j, up with k, open with Enter.
    await page.focus("ol.chain li");
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("j");
    assert.equal(await page.evaluate(() => document.activeElement.dataset.id), items[2].id);
    await page.keyboard.press("k");
    assert.equal(await page.evaluate(() => document.activeElement.dataset.id), items[1].id);
    await page.keyboard.press("End");
    assert.equal(await page.evaluate(() => document.activeElement.dataset.id), items[items.length - 1].id);
    await page.keyboard.press("Home");
    await page.keyboard.press("ArrowDown");
    await Promise.all([page.keyboard.press("Enter"), ready(page)]);
    assert.ok(page.url().endsWith(`/ui/commit/${items[1].id}`));
    // The fork's chain marks where it forked.
    await go(page, `/ui/chain?ref=${encodeURIComponent(data.forkRef)}`);
    const forkItems = await page.$$eval("ol.chain li", (lis) => lis.map((li) => li.textContent));
    assert.equal(forkItems.length, 3);
    // Its first commit says where it forked from, and links to that side.
    assert.match(forkItems[0], new RegExp(`fork of ${data.commits[1].id.slice(0, 12)}`));
    await Promise.all([page.click("ol.chain li a[href*='chain?commit=']"), page.waitForFunction(() => /\/ui\/chain\?commit=/.test(location.pathname + location.search) && document.querySelector("#view[data-ready=true]"))]);
    assert.equal(await page.$eval("ol.chain li", (li) => li.dataset.id), data.commits[1].id);
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test("commit: the delta as a conversation, tool calls beside their results, thinking collapsed, images, errors marked", async () => {
    const page = await open(`/ui/commit/${data.commits[1].id}`);
    assert.match(await text(page, "h1"), new RegExp(`Commit ${data.commits[1].id.slice(0, 12)}`));
    const meta = await text(page, "dl.meta");
    assert.ok(meta.includes(data.principal) && meta.includes(data.sid) && meta.includes("claude-code-v1"));
    // The tool result sits inside its call.
    assert.match(await text(page, ".tool-call .tool-result"), /attempts = 4/);
    assert.equal(await page.$eval("details.thinking", (d) => d.open), false);
    assert.equal(await page.$$eval(".conversation img", (imgs) => imgs.length), 1);
    await accessible(page, "commit");
    // Turn 2's tool call failed: marked as an error.
    await go(page, `/ui/commit/${data.commits[2].id}`);
    assert.match(await text(page, ".tool-result.failed"), /error.*EACCES/s);
    await page.close();
  });

  test("commit: the whole context from the root or the compaction, in another format, downloadable", async () => {
    const page = await open(`/ui/commit/${data.compaction.id}`);
    await page.select("#stop", "root");
    await page.click("#show-context");
    await page.waitForFunction(() => document.querySelector("section[aria-label='The whole context'] .conversation"));
    const turns = await page.$$eval("section[aria-label='The whole context'] .turn", (t) => t.length);
    assert.ok(turns >= 8, `${turns} turns from the root`);
    assert.equal(await page.$eval("#download", (b) => b.disabled), false);
    // From an ancestor: only what came after it.
    await page.type("#stop-at", data.commits[2].id);
    await page.click("#show-context");
    await page.waitForFunction(() => /tier/.test(document.querySelector("section[aria-label='The whole context']").textContent));
    const after = await page.$$eval("section[aria-label='The whole context'] .turn", (t) => t.map((x) => x.textContent));
    assert.ok(after.length > 0 && after.length < turns, `${after.length} turns after turn 2`);
    // Turn 3 and the compaction on it; none of turns 0-2 themselves. The
    // compaction's summary stands for every turn it replaces, 0 to 3.
    const summary = after.filter((t) => /being continued from a previous conversation/.test(t));
    const rest = after.filter((t) => !summary.includes(t));
    assert.equal(summary.length, 1, after.join(" | "));
    assert.ok([0, 1, 2, 3].every((i) => summary[0].includes(`(turn ${i})`)), summary[0]);
    assert.ok(rest.some((t) => /Question 3:/.test(t)), after.join(" | "));
    assert.ok(rest.every((t) => !/\(turn [012]\)/.test(t)), after.join(" | "));
    await page.$eval("#stop-at", (el) => (el.value = ""));
    await page.select("#stop", "compaction");
    await page.select("#format", "openai-chat-v1");
    await page.click("#show-context");
    await page.waitForFunction(() => /tier/.test(document.querySelector("section[aria-label='The whole context']").textContent));
    assert.match(await text(page, "section[aria-label='The whole context']"), /tier (cross-runtime|native|field-level|narrative)/);
    assert.match(await text(page, "section[aria-label='The whole context'] .conversation"), /\S/);
    await page.close();
  });

  test("compare: the nearest common ancestor and what each side added", async () => {
    const page = await open(`/ui/compare?a=${data.compaction.id}&b=${data.fork.id}`);
    assert.match(await text(page, "#common"), new RegExp(data.commits[1].id));
    const sides = await page.$$eval("section[aria-label=A] li, section[aria-label=B] li", (lis) => lis.length);
    assert.equal(sides, data.commits.length - 2 + 1 + 1);
    // What a side's commit added, side by side: its delta, read when opened.
    await page.click("section[aria-label=B] details.added summary");
    await page.waitForSelector("section[aria-label=B] details.added .conversation");
    assert.match(await text(page, "section[aria-label=B] details.added .conversation"), /Question 9:/);
    await accessible(page, "compare");
    await page.close();
  });

  test("time travel: an instant older than a day names what was known then, and the timeline scrubs to what is known now", async () => {
    // A session of its own, so that its newest commit (the compaction, dated
    // now by the server) is written just before the page opens.
    const api = client(URL_, TOKEN);
    const d = await seed(api, "trvl", { turns: 3 });
    // Two days ago, half a minute off the page's minute grid: a timeline that
    // starts there and steps by whole minutes has no stop in the last half
    // minute before now, where the compaction is.
    const at = localInput(Date.now() - 2 * 86_400_000 - 30_000);
    assert.ok(Date.parse(at) < Date.now() - 86_400_000, "an instant older than a day");
    const page = await open(`/ui/travel?principal=${d.principal}&at=${at}`);
    // The page reads the time in the browser's zone, as Node does on this machine:
    // it names the commit the API resolves for that instant, the last turn before it.
    const instant = new Date(at).toISOString();
    const want = (await api("GET", `/v1/resolve?principal=${d.principal}&at=${encodeURIComponent(instant)}`)).id;
    assert.equal(want, d.commits.at(-1).id, "the seeded session's last turn");
    assert.match(await text(page, "#known"), new RegExp(`${d.principal} knew ${want}`));
    // The timeline starts at the instant asked for and reaches now.
    const [min, max] = await page.$eval("input.timeline", (el) => [Number(el.min), Number(el.max)]);
    assert.equal(min, Date.parse(at));
    assert.ok(max >= Date.parse(d.compaction.created_at), "the timeline's end is at or after the newest commit");
    // Scrubbing to its end answers what the principal knows now: the compaction.
    await page.$eval("input.timeline", (el) => {
      el.value = el.max;
      el.dispatchEvent(new Event("input"));
    });
    await page.waitForFunction((id) => document.querySelector("#known").textContent.includes(id), {}, d.compaction.id);
    assert.match(await text(page, "#known"), new RegExp(`At now, ${d.principal} knew ${d.compaction.id}`));
    await accessible(page, "travel");
    await page.close();
  });

  test("erasing a principal asks first and shows the counts", async () => {
    const s = await seed(client(URL_, TOKEN), "prnc", { turns: 2 });
    const page = await open(`/ui/travel?principal=bob-prnc`);
    await page.click("main button.danger");
    await page.waitForSelector("#confirm[open]");
    assert.match(await text(page, "#confirm-text"), /principal bob-prnc.*cannot be undone/);
    await page.click("#confirm-ok");
    await page.waitForSelector("#erased");
    assert.match(await text(page, "#erased"), /^Erased 1 commits, 1 refs/);
    await assert.rejects(client(URL_, TOKEN)("GET", `/v1/commits/${s.fork.id}`), /404/);
    await client(URL_, TOKEN)("GET", `/v1/commits/${s.commits[1].id}`);
    await page.close();
  });

  test("live: a commit written while following appears without a reload", async () => {
    const page = await open(`/ui/chain?ref=${encodeURIComponent(data.forkRef)}`);
    await page.click("#follow");
    const before = await page.$$eval("ol.chain li", (l) => l.length);
    await client(URL_, TOKEN)("POST", "/v1/commits", {
      commit_type: "delta",
      format: "claude-code-v1",
      template: "claude-code",
      principal: "bob-main",
      checkpoint: "turn_boundary",
      created_at: new Date().toISOString(),
      delta: JSON.stringify({ type: "user", uuid: "live-1", message: { role: "user", content: "written live" } }) + "\n",
      parent: data.fork.id,
      summary: "written while you watched",
      ref: { name: data.forkRef, expected: data.fork.id },
    });
    await page.waitForFunction((n) => document.querySelectorAll("ol.chain li").length === n + 1, { timeout: 10_000 }, before);
    assert.match(await text(page, "ol.chain li"), /written while you watched/);
    await page.close();
  });

  test("agents and workspaces: window, saves, files and read_context", async () => {
    const page = await open(`/ui/agents/${data.agent}`);
    assert.match(await text(page, "main"), /3,600 s/);
    assert.match(await text(page, "main"), /before the refactor/);
    await accessible(page, "agents");
    await go(page, `/ui/workspaces/${data.ws}`);
    assert.match(await text(page, "tbody"), /notes\/brief\.md/);
    assert.match(await text(page, "main"), /read_context/);
    await accessible(page, "workspaces");
    await page.close();
  });

  test("another tenant's commit is a 404 as the API states it, never a blank page", async () => {
    const page = await open(`/ui/commit/${other.commits[0].id}`);
    assert.match(await text(page, ".error"), /^404 not_found/);
    await page.close();
  });

  test("tags are replaced after a confirmation; eviction from the chain asks first and reports its counts", async () => {
    const s = await seed(client(URL_, TOKEN), "tags", { turns: 3 });
    const page = await open(`/ui/commit/${s.commits[0].id}`);
    await page.$eval("#new-tags", (el) => (el.value = ""));
    await page.type("#new-tags", "team=search, ticket=T-1");
    await page.evaluate(() => [...document.querySelectorAll("section[aria-label='Operator actions'] button")].find((b) => b.textContent === "Save the tags").click());
    await page.waitForSelector("#confirm[open]");
    assert.match(await text(page, "#confirm-text"), /replaced/);
    await page.click("#confirm-ok");
    await page.waitForSelector("#tags-saved");
    const c = await client(URL_, TOKEN)("GET", `/v1/commits/${s.commits[0].id}`);
    assert.deepEqual(c.tags, { team: "search", ticket: "T-1" });
    await go(page, `/ui/chain?ref=${encodeURIComponent(s.ref)}`);
    await page.click("#evict");
    await page.waitForSelector("#confirm[open]");
    assert.match(await text(page, "#confirm-text"), new RegExp(`older than compaction ${s.compaction.id}`));
    await page.click("#confirm-ok");
    await page.waitForSelector("#evicted");
    assert.match(await text(page, "#evicted"), /Evicted the deltas of 1 commits/);
    await page.close();
  });

  test("a session's active folded branches, and a branch's own chain", async () => {
    const s = await seed(client(URL_, TOKEN), "fold", { turns: 2 });
    const br = await client(URL_, TOKEN)("POST", "/v1/branches", { session_id: s.sid, description: "try the other config", budget: 5000 });
    const page = await open(`/ui/chain?ref=${encodeURIComponent(s.ref)}`);
    const folded = await text(page, "section[aria-label='Active folded branches']");
    assert.match(folded, new RegExp(`${br.branch_id} active · depth 1 · 0 of 5,000 tokens used · try the other config`));
    await go(page, `/ui/chain?ref=${encodeURIComponent(br.chain_ref)}`);
    assert.match(await text(page, "ol.chain li"), new RegExp(br.branch_id));
    await accessible(page, "branches");
    await page.close();
  });

  test("an evicted delta shows the API's 410, naming the compaction to start from", async () => {
    const old = await seed(client(URL_, TOKEN), "evct", { turns: 3 });
    // The last turn under the compaction loses its delta (the older ones
    // stay: the seed's fork continues from turn 1).
    const evicted = await client(URL_, TOKEN)("POST", `/v1/refs/${old.ref}/evict`, { before: old.compaction.id });
    assert.equal(evicted.commits, 1);
    const page = await open(`/ui/commit/${old.commits[2].id}`);
    const shown = await text(page, "section[aria-label=\"This commit's delta\"] .error");
    assert.match(shown, /^410 gone/);
    assert.match(shown, new RegExp(old.compaction.id));
    // The metadata stays.
    assert.match(await text(page, "dl.meta"), new RegExp(old.sid));
    await page.close();
  });

  test("erase asks first: cancel keeps the session, confirm erases it and shows the counts", async () => {
    const victim = await seed(client(URL_, TOKEN), "gone", { turns: 2 });
    const page = await open(`/ui/commit/${victim.commits[0].id}`);
    const erase = await page.$$("section[aria-label='Operator actions'] button.danger");
    assert.equal(erase.length, 1);
    await erase[0].click();
    await page.waitForSelector("#confirm[open]");
    assert.match(await text(page, "#confirm-text"), new RegExp(`session ${victim.sid}.*cannot be undone`));
    await page.click("#confirm button[value=cancel]");
    await client(URL_, TOKEN)("GET", `/v1/commits/${victim.commits[0].id}`);
    await erase[0].click();
    await page.waitForSelector("#confirm[open]");
    await page.click("#confirm-ok");
    // A fork continues from this session: the API's 409 is shown, with the cascade it names.
    await page.waitForSelector("#erase-cascade");
    assert.match(await text(page, "section[aria-label='Operator actions'] .error"), /^409 conflict \(field cascade\)/);
    await client(URL_, TOKEN)("GET", `/v1/commits/${victim.commits[0].id}`);
    await page.click("#erase-cascade");
    await page.waitForSelector("#confirm[open]");
    assert.match(await text(page, "#confirm-text"), /descendants|continues from it/);
    await page.click("#confirm-ok");
    await page.waitForSelector("#erased");
    assert.match(await text(page, "#erased"), /Erased [1-9]\d* commits, 2 refs.*, 1 descendant commits of other sessions/);
    await assert.rejects(client(URL_, TOKEN)("GET", `/v1/commits/${victim.fork.id}`), /404/);
    await assert.rejects(client(URL_, TOKEN)("GET", `/v1/commits/${victim.commits[0].id}`), /404/);
    await page.close();
  });
});
