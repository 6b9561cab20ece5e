// Screenshots of each view of the context browser at 1280×800, from the
// seeded server tests/ui/run --screenshots started: docs/ui/<view>.png.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import puppeteer from "puppeteer-core";

import { client, localInput, seed } from "./seed.mjs";

const out = process.argv[2];
const url = process.env.CTX_TEST_URL;
const token = process.env.CTX_TEST_TOKEN;
mkdirSync(out, { recursive: true });
const data = await seed(client(url, token), "demo", { turns: 6 });
const browser = await puppeteer.launch({
  executablePath: process.env.CTX_CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--font-render-hinting=none"],
  defaultViewport: { width: 1280, height: 800 },
});
const page = await browser.newPage();
const ready = () => page.waitForSelector("#view[data-ready=true]");
async function shot(name, path, then) {
  await page.evaluate((p) => {
    history.pushState(null, "", p);
    window.scrollTo(0, 0);
    window.dispatchEvent(new PopStateEvent("popstate"));
  }, path);
  await ready();
  if (then) await then();
  await page.screenshot({ path: join(out, `${name}.png`) });
  console.log(`docs/ui/${name}.png`);
}
await page.goto(`${url}/ui`);
await page.screenshot({ path: join(out, "sign-in.png") });
console.log("docs/ui/sign-in.png");
await page.type("#token", token);
await Promise.all([page.click("#login button[type=submit]"), ready()]);
await shot("refs", "/ui?prefix=claude/");
await shot("chain", `/ui/chain?ref=${encodeURIComponent(data.ref)}`, async () => {
  await page.focus("ol.chain li");
  await page.keyboard.press("ArrowDown");
});
await shot("commit", `/ui/commit/${data.commits[1].id}`);
await shot("context", `/ui/commit/${data.compaction.id}`, async () => {
  await page.select("#stop", "root");
  await page.click("#show-context");
  await page.waitForFunction(() => document.querySelector("section[aria-label='The whole context'] .conversation"));
  await page.$eval("section[aria-label='The whole context']", (el) => el.scrollIntoView());
});
await shot("compare", `/ui/compare?a=${data.compaction.id}&b=${data.fork.id}`, async () => {
  await page.click("section[aria-label=B] details.added summary");
  await page.waitForSelector("section[aria-label=B] details.added .conversation");
});
await shot("travel", `/ui/travel?principal=${data.principal}&at=${localInput(data.base + 2.5 * 60_000)}`);
await shot("agent", `/ui/agents/${data.agent}`);
await shot("workspace", `/ui/workspaces/${data.ws}`);
await shot("erase", `/ui/commit/${data.commits[0].id}`, async () => {
  await page.click("section[aria-label='Operator actions'] button.danger");
  await page.waitForSelector("#confirm[open]");
});
await browser.close();
