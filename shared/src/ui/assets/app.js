// The ctx context browser: views over the v1 API of the server that serves
// this page. Plain DOM, no dependencies, nothing fetched but this origin's
// API. The bearer token lives in this tab's session storage only.

const TOKEN_KEY = "ctx.token";
const PAGE = 200; // commits a chain page shows
const REFS_PAGE = 100; // refs a refs page shows
const FORMATS = ["claude-code-v1", "anthropic-messages-v1", "openai-chat-v1", "openai-responses-v1", "raw"];

const $ = (sel, root = document) => root.querySelector(sel);
const view = () => $("#view");

// --- elements ---------------------------------------------------------------

/** An element: h("a.badge", {href}, "text", child…). */
function h(tag, attrs = {}, ...children) {
  const [name, ...classes] = tag.split(".");
  const el = document.createElement(name);
  if (classes.length) el.className = classes.join(" ");
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** A link to a view of this page (navigates without a reload). */
function link(href, ...children) {
  return h("a", { href, "data-nav": true }, ...children);
}

const short = (id) => (id ? id.slice(0, 12) : "");
const when = (t) => (t ? new Date(t).toLocaleString() : "");
const num = (n) => (n === undefined || n === null ? "" : Number(n).toLocaleString());
const plural = (n, word) => `${num(n)} ${word}${n === 1 ? "" : "s"}`;

function status(text) {
  $("#status").textContent = text;
  if (text) setTimeout(() => $("#status").textContent === text && ($("#status").textContent = ""), 2500);
}

// --- the API ----------------------------------------------------------------

class ApiError extends Error {
  constructor(status, kind, message, field, body) {
    super(message);
    this.status = status;
    this.kind = kind;
    this.field = field;
    this.body = body;
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** One API request; the error as the API states it (kind, message, field). */
async function api(method, path, body, { raw = false } = {}) {
  const headers = { accept: "application/json" };
  const t = token();
  if (t) headers.authorization = `Bearer ${t}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  let resp;
  try {
    resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, "unavailable", `the server did not answer: ${e.message}`);
  }
  if (!resp.ok) {
    let parsed = null;
    try {
      parsed = await resp.json();
    } catch {
      parsed = null;
    }
    const d = parsed?.error;
    throw new ApiError(resp.status, d?.kind ?? `HTTP ${resp.status}`, d?.message ?? resp.statusText, d?.field, parsed);
  }
  if (raw) return new Uint8Array(await resp.arrayBuffer());
  return resp.json();
}

const enc = encodeURIComponent;
const refPath = (name) => name.split("/").map(enc).join("/");

/** The bytes of a read: inline when small, else the artifact downloaded. */
async function readBytes(request) {
  const got = await api("POST", "/v1/read", request);
  let bytes;
  if (typeof got.content === "string") bytes = new TextEncoder().encode(got.content);
  else if (typeof got.content_base64 === "string") bytes = Uint8Array.from(atob(got.content_base64), (c) => c.charCodeAt(0));
  else bytes = await api("GET", `/v1/artifacts/${got.artifact_ref}`, undefined, { raw: true });
  return { ...got, bytes };
}

/** An error as the API stated it, never a blank page. */
function errorBox(e, extra) {
  if (e instanceof ApiError && e.status === 401) {
    showLogin("The server did not accept the token: " + e.message);
  }
  return h(
    "div.error",
    { role: "alert" },
    h("span.kind", {}, e instanceof ApiError ? `${e.status} ${e.kind}` : "error"),
    e instanceof ApiError && e.field ? ` (field ${e.field})` : "",
    ": ",
    e.message,
    extra,
  );
}

// --- sign-in ------------------------------------------------------------------

function showLogin(message) {
  const form = $("#login");
  form.hidden = false;
  view().hidden = true;
  $("#forget").hidden = true;
  const err = $("#login-error");
  err.hidden = !message;
  err.textContent = message ?? "";
  $("#token").focus();
}

function setupLogin() {
  $("#login").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const value = $("#token").value.trim();
    sessionStorage.setItem(TOKEN_KEY, value);
    try {
      await api("GET", "/v1/refs?limit=1");
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(e instanceof ApiError ? `${e.status} ${e.kind}: ${e.message}` : e.message);
      return;
    }
    $("#token").value = "";
    $("#login").hidden = true;
    view().hidden = false;
    render();
  });
  $("#forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin();
  });
}

// --- confirmation -------------------------------------------------------------

/** Asks before an action, naming what will happen; true when confirmed. */
function confirmAction(title, text, verb) {
  const dialog = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-text").textContent = text;
  $("#confirm-ok").textContent = verb;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true }));
}

// --- conversations ------------------------------------------------------------

/** A delta's bytes as turns ({role, parts}), by its format; null when it has no conversation form. */
function turnsOf(format, bytes) {
  const text = new TextDecoder().decode(bytes);
  try {
    if (format === "claude-code-v1") {
      const turns = [];
      for (const line of text.split("\n")) {
        if (!line.trim()) continue;
        let e;
        try {
          e = JSON.parse(line);
        } catch {
          turns.push({ role: "unreadable line", parts: [{ kind: "error", text: line }] });
          continue;
        }
        if (e?.message?.role) turns.push({ role: e.message.role, parts: partsOf(e.message.content), when: e.timestamp });
        else if (e?.type === "summary") turns.push({ role: "summary", parts: [{ kind: "text", text: e.summary ?? "" }] });
      }
      return turns;
    }
    if (format === "anthropic-messages-v1" || format === "openai-chat-v1") {
      const messages = JSON.parse(text);
      return messages.map((m) => {
        const parts = partsOf(m.content);
        for (const call of m.tool_calls ?? []) {
          parts.push({ kind: "tool_call", id: call.id, name: call.function?.name, input: call.function?.arguments });
        }
        if (m.role === "tool") return { role: "tool", parts: [{ kind: "tool_result", id: m.tool_call_id, content: m.content }] };
        return { role: m.role, parts };
      });
    }
    if (format === "openai-responses-v1") {
      return JSON.parse(text).map((item) => {
        if (item.type === "function_call") return { role: "assistant", parts: [{ kind: "tool_call", id: item.call_id, name: item.name, input: item.arguments }] };
        if (item.type === "function_call_output") return { role: "tool", parts: [{ kind: "tool_result", id: item.call_id, content: item.output }] };
        if (item.type === "reasoning") return { role: "assistant", parts: [{ kind: "thinking", text: (item.summary ?? []).map((s) => s.text).join("\n") }] };
        return { role: item.role ?? item.type, parts: partsOf(item.content) };
      });
    }
  } catch {
    return null;
  }
  return null;
}

function partsOf(content) {
  if (typeof content === "string") return [{ kind: "text", text: content }];
  if (!Array.isArray(content)) return content === undefined || content === null ? [] : [{ kind: "text", text: JSON.stringify(content) }];
  return content.map((b) => {
    switch (b?.type) {
      case "text":
      case "input_text":
      case "output_text":
        return { kind: "text", text: b.text };
      case "thinking":
        return { kind: "thinking", text: b.thinking };
      case "redacted_thinking":
        return { kind: "thinking", text: "(redacted)" };
      case "tool_use":
        return { kind: "tool_call", id: b.id, name: b.name, input: b.input };
      case "tool_result":
        return { kind: "tool_result", id: b.tool_use_id, content: b.content, failed: b.is_error === true };
      case "image":
        return b.source?.type === "base64"
          ? { kind: "image", src: `data:${b.source.media_type};base64,${b.source.data}` }
          : { kind: "text", text: "[image]" };
      case "image_url":
        return { kind: "image", src: b.image_url?.url };
      default:
        return { kind: "text", text: JSON.stringify(b) };
    }
  });
}

const asText = (v) => (typeof v === "string" ? v : JSON.stringify(v, null, 2));

function resultContent(content) {
  if (typeof content === "string") return h("pre", {}, content);
  if (Array.isArray(content)) return h("div", {}, ...content.map((b) => (b?.type === "text" ? h("pre", {}, b.text) : h("pre", {}, asText(b)))));
  return h("pre", {}, asText(content));
}

/** Renders turns, each tool result next to its call; `limit` turns at first, the rest as the browser idles. */
function conversation(turns, { progressive = false } = {}) {
  const root = h("div.conversation");
  const calls = new Map();
  const one = (t) => {
    const el = h(`div.turn.${/^[a-z]+$/.test(t.role) ? t.role : "other"}`, {}, h("div.role", {}, t.role, t.when ? h("span.muted", {}, ` · ${when(t.when)}`) : ""));
    let shown = false;
    for (const p of t.parts) {
      if (p.kind === "tool_result" && calls.has(p.id)) {
        calls.get(p.id).append(h(`div.tool-result${p.failed ? ".failed" : ""}`, {}, p.failed ? h("span.badge.error", {}, "error") : "", h("strong", {}, "result"), resultContent(p.content)));
        continue;
      }
      shown = true;
      el.append(part(p, calls));
    }
    if (shown || t.parts.length === 0) root.append(el);
  };
  const first = progressive ? 200 : turns.length;
  turns.slice(0, first).forEach(one);
  if (turns.length > first) {
    let i = first;
    const more = () => {
      const end = Math.min(i + 500, turns.length);
      for (; i < end; i++) one(turns[i]);
      if (i < turns.length) setTimeout(more, 0);
    };
    setTimeout(more, 0);
  }
  return root;
}

function part(p, calls) {
  switch (p.kind) {
    case "text":
      return h("div.part", {}, h("pre", {}, p.text ?? ""));
    case "thinking":
      return h("details.part.thinking", {}, h("summary", {}, "thinking"), h("pre", {}, p.text ?? ""));
    case "image":
      return h("div.part", {}, h("img", { src: p.src, alt: "an image in the conversation" }));
    case "error":
      return h("div.part", {}, h("span.badge.error", {}, "unreadable"), h("pre", {}, p.text));
    case "tool_call": {
      const el = h("div.part.tool-call", {}, h("strong", {}, `tool call ${p.name ?? ""}`), h("pre", {}, asText(p.input)));
      if (p.id) calls.set(p.id, el);
      return el;
    }
    case "tool_result":
      return h(`div.part.tool-result${p.failed ? ".failed" : ""}`, {}, p.failed ? h("span.badge.error", {}, "error") : "", h("strong", {}, "tool result"), resultContent(p.content));
    default:
      return h("div.part", {}, h("pre", {}, asText(p)));
  }
}

// --- views --------------------------------------------------------------------

/** A view's form: its fields and submit button; submitting opens the URL `to` makes of its data. */
function viewForm(to, submit, ...fields) {
  return h(
    "form.filters",
    {
      onsubmit: (ev) => {
        ev.preventDefault();
        navigate(to(new FormData(ev.target)));
      },
    },
    ...fields,
    h("button", { type: "submit" }, submit),
  );
}

const queryOf = (data) => new URLSearchParams([...data].filter(([, v]) => v));

function badges(c) {
  return [
    c.commit_type !== "delta" ? h(`span.badge.${c.commit_type}`, {}, c.commit_type) : "",
    // A fork: its other side is the chain it continues from.
    c.parent_lineage && c.parent_lineage !== c.lineage && c.parent ? link(`/ui/chain?commit=${c.parent}`, h("span.badge.fork", { title: `forked from ${c.parent}` }, "fork of ", short(c.parent))) : "",
    c.tags?.branch ? h("span.badge", { title: "a folded branch" }, c.tags.branch, c.tags.branch_status ? ` ${c.tags.branch_status}` : "") : "",
    c.checkpoint === "branch_return" ? h("span.badge", {}, "branch return") : "",
  ];
}

/** 1. Sessions and refs: newest activity first. */
async function refsView(params) {
  const prefix = params.get("prefix") ?? "";
  const principal = params.get("principal") ?? "";
  const since = params.get("since") ?? "";
  const after = params.get("after") ?? "";
  const limit = Math.min(Number(params.get("limit") ?? REFS_PAGE) || REFS_PAGE, 1000);
  const form = viewForm(
    (d) => `/ui?${queryOf(d)}`,
    "Filter",
    h("label", {}, "Prefix", h("input", { name: "prefix", value: prefix, placeholder: "claude/" })),
    h("label", {}, "Principal", h("input", { name: "principal", value: principal })),
    h("label", {}, "Active since", h("input", { name: "since", type: "datetime-local", value: since })),
  );
  const body = h("tbody");
  const out = [h("h1", {}, "Sessions and refs"), form, h("table", {}, h("thead", {}, h("tr", {}, ...["Ref", "Principal", "Summary", "Depth", "Messages", "Tokens", "Last activity"].map((t, i) => h(i >= 3 && i <= 5 ? "th.num" : "th", { scope: "col" }, t)))), body)];
  const q = new URLSearchParams({ prefix, limit: String(limit) });
  if (after) q.set("after", after);
  const { refs, next } = await api("GET", `/v1/refs?${q}`);
  const activeSince = since ? Date.parse(since) : 0;
  const shown = refs.filter((r) => Date.parse(r.updated_at) >= activeSince).sort((a, b) => b.updated_at.localeCompare(a.updated_at));
  const tips = await Promise.all(shown.map((r) => api("GET", `/v1/commits/${r.target}`).catch(() => null)));
  shown.forEach((r, i) => {
    const c = tips[i];
    if (principal && c?.principal !== principal) return;
    body.append(
      h(
        "tr",
        {},
        h("td", {}, link(`/ui/chain?ref=${enc(r.name)}`, r.name)),
        h("td", {}, c?.principal ?? ""),
        h("td", {}, c ? c.summary ?? h("span.muted", {}, "summarizing…") : ""),
        h("td.num", {}, num(c?.depth)),
        h("td.num", {}, num(c?.message_count)),
        h("td.num", {}, num(c?.token_count)),
        h("td", {}, when(r.updated_at)),
      ),
    );
  });
  if (!body.children.length) out.push(h("p.muted", {}, "No refs match on this page."));
  // Pages go by name (the API's order); each is sorted by activity.
  const keep = (extra) => `/ui?${new URLSearchParams(Object.entries({ prefix, principal, since, ...extra }).filter(([, v]) => v))}`;
  out.push(
    h(
      "nav.toolbar",
      { "aria-label": "Pages" },
      after ? link(keep({}), "First page") : "",
      next ? link(keep({ after: next }), "Next page") : "",
      h("span.muted", {}, `${refs.length} refs on this page${after ? `, after ${after}` : ""}`),
    ),
  );
  return out;
}

/** 2. Chain: a git log of a ref or commit, paged, followed live. */
async function chainView(params) {
  const ref = params.get("ref");
  let tip = params.get("commit");
  if (ref) tip = (await api("GET", `/v1/refs/${refPath(ref)}`)).target;
  if (!tip) return [h("h1", {}, "Chain"), h("p.muted", {}, "Open a chain from the refs list, or give ?ref= or ?commit=.")];
  const list = h("ol.chain", { "aria-label": "Commits, newest first" });
  const more = h("button.quiet", { type: "button" }, "Older commits");
  let next = tip;
  const seen = new Set();
  const row = (c) => {
    seen.add(c.id);
    return h(
      `li.${c.commit_type}`,
      { tabindex: "-1", dataset: { id: c.id } },
      h("span.glyph", { "aria-hidden": "true" }, c.commit_type === "compaction" ? "◆" : c.commit_type === "snapshot" ? "■" : "●"),
      link(`/ui/commit/${c.id}`, h("code", {}, short(c.id))),
      h("span", {}, ...badges(c), c.summary ?? h("span.muted", {}, "summarizing…")),
      h("span.muted", {}, c.principal),
      h("span.muted", {}, when(c.created_at)),
      h("span.muted.num", {}, `${num(c.message_count)} msgs`),
    );
  };
  const page = async () => {
    if (!next) return;
    more.disabled = true;
    const { commits } = await api("GET", `/v1/commits/${next}/history?depth=${PAGE}`);
    for (const c of commits) if (!seen.has(c.id)) list.append(row(c));
    const last = commits[commits.length - 1];
    next = commits.length >= PAGE && last?.parent ? last.parent : null;
    more.hidden = !next;
    more.disabled = false;
  };
  more.addEventListener("click", () => page().catch((e) => list.after(errorBox(e))));
  await page();
  // Keyboard: j/k or the arrows move, Enter opens, Home/End jump.
  list.addEventListener("keydown", (ev) => {
    const rows = [...list.children];
    const i = rows.indexOf(document.activeElement.closest("li"));
    let to = null;
    if (ev.key === "ArrowDown" || ev.key === "j") to = Math.min(i + 1, rows.length - 1);
    else if (ev.key === "ArrowUp" || ev.key === "k") to = Math.max(i - 1, 0);
    else if (ev.key === "Home") to = 0;
    else if (ev.key === "End") to = rows.length - 1;
    else if (ev.key === "Enter" && i >= 0) {
      ev.preventDefault();
      navigate(`/ui/commit/${rows[i].dataset.id}`);
      return;
    }
    if (to === null) return;
    ev.preventDefault();
    rows.forEach((r) => r.classList.remove("current"));
    rows[to].classList.add("current");
    rows[to].tabIndex = 0;
    rows[to].focus();
  });
  if (list.firstElementChild) list.firstElementChild.tabIndex = 0;
  // Live: follow the ref's new commits as they are written.
  const follow = h("input", { type: "checkbox", id: "follow" });
  let timer = null;
  follow.addEventListener("change", () => {
    clearInterval(timer);
    if (!follow.checked || !ref) return;
    timer = setInterval(async () => {
      if (!document.body.contains(list)) return clearInterval(timer);
      try {
        const now = (await api("GET", `/v1/refs/${refPath(ref)}`)).target;
        if (now === tip) return;
        const { commits } = await api("GET", `/v1/commits/${now}/history?depth=${PAGE}`);
        const fresh = [];
        for (const c of commits) {
          if (seen.has(c.id)) break;
          fresh.push(row(c));
        }
        list.prepend(...fresh);
        tip = now;
        status(`${fresh.length} new commit${fresh.length === 1 ? "" : "s"}`);
      } catch (e) {
        status(`live: ${e.message}`);
      }
    }, 1000);
  });
  const head = await api("GET", `/v1/commits/${tip}`);
  // The session's active folded branches, deepest first.
  const branches = h("section", { "aria-label": "Active folded branches" });
  if (head.session_id) {
    try {
      const b = await api("GET", `/v1/branches?session_id=${enc(head.session_id)}`);
      const active = b.active_branches ?? [];
      if (active.length) {
        branches.append(
          h("h2", {}, "Active folded branches"),
          h("ul", {}, ...active.map((x) => h("li", {}, h("code", {}, x.branch_id), ` ${x.status} · depth ${num(x.depth)} · ${num(x.budget_used)} of ${num(x.budget_total)} tokens used · ${x.description ?? ""}${x.deadline ? ` · times out ${when(x.deadline)}` : ""}`))),
        );
      }
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) branches.append(errorBox(e));
    }
  }
  // Operator: drop the deltas under the newest compaction shown.
  const evicted = h("div", { role: "status" });
  const evict = h("button.danger", { type: "button", id: "evict" }, "Evict old deltas…");
  evict.addEventListener("click", async () => {
    const compaction = [...list.children].find((li) => li.classList.contains("compaction"))?.dataset.id;
    if (!compaction) {
      evicted.replaceChildren(h("p.muted", {}, "No compaction in the commits shown: nothing to evict before."));
      return;
    }
    if (!(await confirmAction("Evict old deltas", `The deltas of the commits older than compaction ${compaction} on ${ref} are deleted (their metadata and summaries stay; other chains keep what they need). Reading across them then answers 410.`, "Evict"))) return;
    try {
      const e = await api("POST", `/v1/refs/${refPath(ref)}/evict`, { before: compaction });
      evicted.replaceChildren(h("p", { id: "evicted" }, `Evicted the deltas of ${num(e.commits)} commits (${num(e.artifacts)} artifacts, ${num(e.cache)} cache entries); ${num(e.kept.length)} kept for other chains.`));
    } catch (err) {
      evicted.replaceChildren(errorBox(err));
    }
  });
  return [
    h("h1", {}, ref ?? `Chain of ${short(tip)}`),
    h("p.muted", {}, `Session ${head.session_id ?? "—"} · depth ${num(head.depth)} · ${plural(head.message_count, "message")} at the tip`),
    h("div.toolbar", {}, ref ? h("label", { for: "follow", class: "inline" }, h("span", {}, follow, " Follow new commits")) : "", link(`/ui/commit/${tip}`, "Tip commit"), ref ? evict : ""),
    evicted,
    branches,
    list,
    more,
  ];
}

/** 3. Commit: metadata, the delta as a conversation, the whole context on demand, operator actions. */
async function commitView(id) {
  const c = await api("GET", `/v1/commits/${id}`);
  const meta = h(
    "dl.meta",
    {},
    ...[
      ["Commit", h("code", {}, c.id)],
      ["Type", h("span", {}, ...badges(c), c.commit_type)],
      ["Parent", c.parent ? link(`/ui/commit/${c.parent}`, h("code", {}, c.parent)) : "none (a root)"],
      ["Principal", c.principal],
      ["Session", c.session_id ?? "—"],
      ["Created", when(c.created_at)],
      ["Format", c.format],
      ["Checkpoint", c.checkpoint],
      ["Depth", num(c.depth)],
      ["Messages / tokens", `${num(c.message_count)} / ${num(c.token_count)}`],
      ["Summary", c.summary ?? h("span.muted", {}, "summarizing…")],
      ["Tags", Object.keys(c.tags ?? {}).length ? Object.entries(c.tags).map(([k, v]) => `${k}=${v}`).join(", ") : "—"],
      ["Ticket / machine", `${c.ticket_id ?? "—"} / ${c.machine ?? "—"}`],
    ].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
  const delta = h("section", { "aria-label": "This commit's delta" }, h("h2", {}, "What this commit added"));
  try {
    const got = await readBytes({ commit: id, delta: true });
    const turns = turnsOf(c.format, got.bytes);
    delta.append(turns ? conversation(turns) : h("pre", {}, new TextDecoder().decode(got.bytes.slice(0, 200_000))));
  } catch (e) {
    delta.append(errorBox(e, e.status === 410 ? " Materialize from the compaction the message names." : ""));
  }
  const stop = h("select", { id: "stop", name: "stop" }, ...["compaction", "root"].map((s) => h("option", { value: s }, s)));
  // Or from an ancestor: the walk starts after it.
  const stopAt = h("input", { id: "stop-at", size: 38, placeholder: "or an ancestor: ctx-…", "aria-label": "Stop at an ancestor commit", pattern: "ctx-[0-9a-f]{32}" });
  const format = h("select", { id: "format", name: "format" }, h("option", { value: "" }, `${c.format} (its own)`), ...FORMATS.filter((f) => f !== c.format).map((f) => h("option", { value: f }, f)));
  const whole = h("section", { "aria-label": "The whole context" });
  let lastBytes = null;
  const show = h("button", { type: "button", id: "show-context" }, "Show the whole context");
  const download = h("button.quiet", { type: "button", id: "download", disabled: true }, "Download");
  show.addEventListener("click", async () => {
    whole.replaceChildren(h("p.muted", {}, "Materializing…"));
    try {
      const f = format.value || c.format;
      const got = await readBytes({ commit: id, stop: stopAt.value.trim() || stop.value, ...(format.value ? { format: format.value } : {}) });
      lastBytes = { bytes: got.bytes, name: `${id}.${f}.${f === "claude-code-v1" ? "jsonl" : "json"}` };
      download.disabled = false;
      const turns = turnsOf(f, got.bytes);
      whole.replaceChildren(
        h("p.muted", {}, `${num(got.message_count)} messages, ${num(got.token_count)} tokens, ${num(got.size)} bytes · tier ${got.tier}${got.cached ? " · cached" : ""}`),
        turns ? conversation(turns, { progressive: true }) : h("pre", {}, new TextDecoder().decode(got.bytes.slice(0, 500_000))),
      );
    } catch (e) {
      whole.replaceChildren(errorBox(e));
    }
  });
  download.addEventListener("click", () => {
    if (!lastBytes) return;
    const a = h("a", { href: URL.createObjectURL(new Blob([lastBytes.bytes])), download: lastBytes.name });
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  });
  const command = `ctx resume ${id}`;
  const copy = h("button.quiet", { type: "button" }, "Copy the resume command");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(command);
      status("copied");
    } catch {
      status(command);
    }
  });
  return [
    h("h1", {}, `Commit ${short(c.id)}`),
    h("div.toolbar", {}, c.session_id ? link(`/ui/chain?commit=${c.id}`, "Chain to here") : link(`/ui/chain?commit=${c.id}`, "Chain to here"), link(`/ui/compare?a=${c.id}`, "Compare with…")),
    meta,
    delta,
    h("h2", {}, "The whole context at this point"),
    h("div.toolbar", {}, h("label", { for: "stop" }, "From", stop), stopAt, h("label", { for: "format" }, "Format", format), show, download, copy, h("code", {}, command)),
    whole,
    actions(c),
  ];
}

/**
 * An erase button for `what` (a session or a principal) at `path`, behind
 * a confirmation; its counts (or the API's error) go in `box`. When other
 * sessions continue from what is erased, the API's 409 names them, and a
 * second confirmed button erases them too (`cascade=true`).
 */
function eraser(label, what, path, box) {
  const erased = (e) =>
    h("p", { id: "erased" }, `Erased ${num(e.commits)} commits, ${num(e.refs)} refs, ${num(e.artifacts)} artifacts (${num(e.artifacts_shared)} shared kept), ${num(e.cache)} cache entries${e.cascaded ? `, ${num(e.cascaded)} descendant commits of other sessions` : ""}${e.backups_until ? `; backups hold them until ${when(e.backups_until)}` : ""}.`);
  const b = h("button.danger", { type: "button" }, label);
  b.addEventListener("click", async () => {
    if (!(await confirmAction(`Erase ${what}`, `Every commit, ref, artifact and cached result of ${what} is deleted for good. This cannot be undone.`, "Erase"))) return;
    try {
      box.replaceChildren(erased(await api("DELETE", path)));
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 409 && e.field === "cascade")) return box.replaceChildren(errorBox(e));
      // Other sessions continue from it: erasing it takes them too, if asked.
      const more = h("button.danger", { type: "button", id: "erase-cascade" }, "Erase with its descendants…");
      more.addEventListener("click", async () => {
        if (!(await confirmAction(`Erase ${what} and its descendants`, `${what} and every commit of other sessions that continues from it (${e.message.split(": ").slice(1).join(": ")}) are deleted for good. This cannot be undone.`, "Erase all"))) return;
        try {
          box.replaceChildren(erased(await api("DELETE", `${path}?cascade=true`)));
        } catch (err) {
          box.replaceChildren(errorBox(err));
        }
      });
      box.replaceChildren(errorBox(e), more);
    }
  });
  return b;
}

/** 8. Operator actions, each behind a confirmation naming what will happen. */
function actions(c) {
  const out = h("section", { "aria-label": "Operator actions" }, h("h2", {}, "Operator actions"));
  const result = h("div", { role: "status" });
  const act = (label, title, text, verb, run, danger = false) => {
    const b = h(`button${danger ? ".danger" : ".quiet"}`, { type: "button" }, label);
    b.addEventListener("click", async () => {
      if (!(await confirmAction(title, text, verb))) return;
      try {
        result.replaceChildren(await run());
      } catch (e) {
        result.replaceChildren(errorBox(e));
      }
    });
    return b;
  };
  const summary = h("input", { id: "new-summary", value: c.summary ?? "", size: 40, "aria-label": "New summary" });
  const tagText = (tags) => Object.entries(tags ?? {}).map(([k, v]) => `${k}=${v}`).join(", ");
  const tags = h("input", { id: "new-tags", value: tagText(c.tags), size: 30, "aria-label": "Tags, as key=value, comma-separated", placeholder: "key=value, …" });
  const parseTags = () => {
    const out = {};
    for (const pair of tags.value.split(",").map((p) => p.trim()).filter(Boolean)) {
      const i = pair.indexOf("=");
      if (i <= 0) throw new ApiError(0, "invalid", `"${pair}" is not key=value`, "tags");
      out[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
    }
    return out;
  };
  out.append(
    h(
      "div.toolbar",
      {},
      summary,
      act("Update the summary", "Update the summary", `The summary of ${c.id} becomes the text you entered.`, "Update", async () => {
        const done = await api("PATCH", `/v1/commits/${c.id}`, { summary: summary.value });
        return h("p", {}, `Summary updated: ${done.summary}`);
      }),
      tags,
      act("Save the tags", "Replace the tags", `Every tag of ${c.id} is replaced by the ones you entered.`, "Save", async () => {
        const done = await api("PATCH", `/v1/commits/${c.id}`, { tags: parseTags() });
        return h("p", { id: "tags-saved" }, `Tags saved: ${tagText(done.tags) || "none"}`);
      }),
      act("Re-compact here", "Re-compact", `A new compaction commit is made on ${c.id}, summarizing the context up to it. Nothing is deleted.`, "Compact", async () => {
        const done = await api("POST", `/v1/commits/${c.id}/compact`, {});
        return h("p", {}, "Compacted: ", link(`/ui/commit/${done.commit.id}`, done.commit.id), ` (${num(done.replaced_messages)} messages replaced)`);
      }),
      c.session_id
        ? act("Pin the session", "Pin the session", `Session ${c.session_id} is kept by retention and eviction until unpinned.`, "Pin", async () => {
            const done = await api("PUT", `/v1/pins/session/${enc(c.session_id)}`);
            return h("p", {}, done.changed ? "Pinned." : "It was pinned already.");
          })
        : "",
      c.session_id
        ? act("Unpin the session", "Unpin the session", `Session ${c.session_id} is no longer kept by its pin.`, "Unpin", async () => {
            const done = await api("DELETE", `/v1/pins/session/${enc(c.session_id)}`);
            return h("p", {}, done.changed ? "Unpinned." : "It was not pinned.");
          })
        : "",
      c.session_id ? eraser("Erase the session…", `session ${c.session_id}`, `/v1/sessions/${enc(c.session_id)}`, result) : "",
    ),
    result,
  );
  return out;
}

/** 4. Compare: the nearest common ancestor, and what each side added since. */
async function compareView(params) {
  const a = params.get("a") ?? "";
  const b = params.get("b") ?? "";
  const form = viewForm(
    (d) => `/ui/compare?${queryOf(d)}`,
    "Compare",
    h("label", {}, "Commit A", h("input", { name: "a", value: a, size: 40, required: true })),
    h("label", {}, "Commit B", h("input", { name: "b", value: b, size: 40, required: true })),
  );
  const out = [h("h1", {}, "Compare two commits"), form];
  if (!a || !b) return out;
  const [ha, hb] = await Promise.all([a, b].map((id) => api("GET", `/v1/commits/${id}/history?depth=1000`)));
  const inB = new Set(hb.commits.map((c) => c.id));
  const base = ha.commits.find((c) => inB.has(c.id));
  const since = (commits) => {
    const out = [];
    for (const c of commits) {
      if (base && c.id === base.id) break;
      out.push(c);
    }
    return out;
  };
  // Each commit's delta, read when its details are opened.
  const added = (c) => {
    const d = h("details.added", {}, h("summary", {}, `what ${short(c.id)} added`));
    d.addEventListener("toggle", async () => {
      if (!d.open || d.dataset.loaded) return;
      d.dataset.loaded = "true";
      try {
        const got = await readBytes({ commit: c.id, delta: true });
        const turns = turnsOf(c.format, got.bytes);
        d.append(turns ? conversation(turns) : h("pre", {}, new TextDecoder().decode(got.bytes.slice(0, 200_000))));
      } catch (e) {
        d.append(errorBox(e));
      }
    });
    return d;
  };
  const side = (label, commits) =>
    h(
      "section",
      { "aria-label": label },
      h("h2", {}, `${label}: ${plural(commits.length, "commit")} since`),
      h("ol.compare", {}, ...commits.map((c) => h(`li.${c.commit_type}`, {}, link(`/ui/commit/${c.id}`, h("code", {}, short(c.id))), " ", ...badges(c), c.summary ?? h("span.muted", {}, "summarizing…"), h("span.muted", {}, ` · ${c.principal} · ${when(c.created_at)} · ${plural(c.message_count, "message")}`), added(c)))),
    );
  out.push(
    h("p", { id: "common" }, base ? ["Nearest common ancestor: ", link(`/ui/commit/${base.id}`, h("code", {}, base.id)), ` (${base.summary ?? "no summary yet"})`] : "No common ancestor in the last 1,000 commits of A."),
    h("div.columns", {}, side("A", since(ha.commits)), side("B", since(hb.commits))),
  );
  return out;
}

/** 5. Time travel: what did a principal know at a time. */
async function travelView(params) {
  const principal = params.get("principal") ?? "";
  const at = params.get("at") ?? "";
  const form = viewForm(
    (d) => `/ui/travel?${queryOf(d)}`,
    "What did they know?",
    h("label", {}, "Principal", h("input", { name: "principal", value: principal, required: true })),
    h("label", {}, "At", h("input", { name: "at", type: "datetime-local", step: "1", value: at })),
  );
  const out = [h("h1", {}, "Time travel"), form];
  if (!principal) return out;
  const answer = h("div", { id: "known" });
  const resolve = async (t) => {
    const q = new URLSearchParams({ principal });
    if (t) q.set("at", new Date(t).toISOString());
    try {
      const { id } = await api("GET", `/v1/resolve?${q}`);
      const c = await api("GET", `/v1/commits/${id}`);
      answer.replaceChildren(h("p", {}, `At ${t ? new Date(t).toLocaleString() : "now"}, ${principal} knew `, link(`/ui/commit/${id}`, h("code", {}, id)), `: ${c.summary ?? "summarizing…"} (${num(c.message_count)} messages, written ${when(c.created_at)}).`));
    } catch (e) {
      answer.replaceChildren(errorBox(e));
    }
  };
  await resolve(at ? Date.parse(at) : null);
  // The timeline: from the instant asked for (or a day ago) up to now,
  // scrubbed a minute at a time. A range input only takes min + k·step, so
  // its max is the first step at or past now, and that last stop reads as
  // "now": the end always reaches what the principal knows now, however old
  // the start.
  const step = 60_000;
  const now = Date.now();
  const start = at ? Math.min(Date.parse(at), now - 86_400_000) : now - 86_400_000;
  const end = start + Math.ceil((now - start) / step) * step;
  const scrub = h("input.timeline", { type: "range", min: String(start), max: String(end), step: String(step), value: String(at ? Date.parse(at) : end), "aria-label": "Scrub through time" });
  let pending = null;
  scrub.addEventListener("input", () => {
    clearTimeout(pending);
    const t = Number(scrub.value);
    pending = setTimeout(() => resolve(t >= end ? null : t), 150);
  });
  const erasedBox = h("div", { role: "status" });
  out.push(answer, h("h2", {}, "Timeline"), scrub, h("h2", {}, "Operator actions"), h("div.toolbar", {}, eraser(`Erase everything of ${principal}…`, `principal ${principal}`, `/v1/principals/${enc(principal)}`, erasedBox)), erasedBox);
  return out;
}

/** 7. Agents: settings, the rolling window, saves. */
async function agentView(name) {
  const form = viewForm((d) => `/ui/agents/${enc(d.get("agent"))}`, "Open", h("label", {}, "Agent", h("input", { name: "agent", value: name ?? "", required: true })));
  if (!name) return [h("h1", {}, "Agents"), form];
  const [agent, saves] = await Promise.all([api("GET", `/v1/agents/${enc(name)}`), api("GET", `/v1/agents/${enc(name)}/saves`)]);
  const win = await api("GET", `/v1/agents/${enc(name)}/window`).catch((e) => e);
  const restored = h("div", { role: "status" });
  const restore = (agentName, s) => {
    const b = h("button.quiet", { type: "button" }, "Restore");
    b.addEventListener("click", async () => {
      if (!(await confirmAction("Restore this save", `Agent ${agentName}'s window is replaced by save ${s.save_id} (${s.message_count} messages), checkpointed as new commits. Its current window stays in its history.`, "Restore"))) return;
      try {
        await api("POST", `/v1/agents/${enc(agentName)}/saves/${enc(s.save_id)}/restore`);
        restored.replaceChildren(h("p", {}, `Restored save ${s.save_id}.`));
      } catch (e) {
        restored.replaceChildren(errorBox(e));
      }
    });
    return b;
  };
  return [
    h("h1", {}, `Agent ${name}`),
    form,
    h("dl.meta", {}, h("dt", {}, "Window"), h("dd", {}, `${num(agent.window_seconds)} s`), h("dt", {}, "Last clear"), h("dd", {}, agent.last_clear ? when(agent.last_clear) : "never"), h("dt", {}, "Working context"), h("dd", {}, agent.persist_working_context ? `kept (epoch ${agent.working_context_epoch ?? "—"})` : "not kept")),
    h("h2", {}, "Rolling window"),
    win instanceof Error ? errorBox(win) : h("p", {}, `${num(win.commits.length)} commits, ${num(win.message_count)} messages, ${num(win.token_count)} tokens, ${when(win.since)} to ${when(win.until)} (${win.reason}${win.truncated ? ", truncated" : ""}).`),
    h("h2", {}, "Saves"),
    saves.saves.length ? h("ul", {}, ...saves.saves.map((s) => h("li", {}, h("code", {}, s.save_id), ` ${s.description ?? ""} · ${when(s.timestamp)} · ${num(s.message_count)} messages · ${s.summary} `, restore(name, s)))) : h("p.muted", {}, "No saves."),
    restored,
  ];
}

/** 7. Workspaces: files with their versions, and read_context. */
async function workspaceView(name) {
  const form = viewForm((d) => `/ui/workspaces/${enc(d.get("ws"))}`, "Open", h("label", {}, "Workspace", h("input", { name: "ws", value: name ?? "", required: true })));
  if (!name) return [h("h1", {}, "Workspaces"), form];
  const { files } = await api("GET", `/v1/workspaces/${enc(name)}/files`);
  const context = await api("GET", `/v1/workspaces/${enc(name)}/context`).catch((e) => e);
  return [
    h("h1", {}, `Workspace ${name}`),
    form,
    h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "File"), h("th", { scope: "col" }, "Version"), h("th", { scope: "col" }, "Updated"))), h("tbody", {}, ...files.map((f) => h("tr", {}, h("td", {}, f.path), h("td", {}, link(`/ui/commit/${f.version}`, h("code", {}, short(f.version)))), h("td", {}, when(f.updated_at)))))),
    h("h2", {}, "read_context"),
    context instanceof Error ? errorBox(context) : h("pre", {}, JSON.stringify(context, null, 2)),
  ];
}

// --- routing ------------------------------------------------------------------

function navigate(href) {
  history.pushState(null, "", href);
  window.scrollTo(0, 0);
  render();
}

let rendering = 0;
async function render() {
  if (!token()) return showLogin();
  $("#login").hidden = true;
  view().hidden = false;
  $("#forget").hidden = false;
  const url = new URL(location.href);
  const path = url.pathname.replace(/^\/ui\/?/, "");
  const params = url.searchParams;
  for (const a of document.querySelectorAll(".top nav a")) {
    const target = new URL(a.href).pathname.replace(/^\/ui\/?/, "").split("/")[0];
    a.toggleAttribute("aria-current", target === path.split("/")[0]);
    if (a.hasAttribute("aria-current")) a.setAttribute("aria-current", "page");
  }
  const mine = ++rendering;
  view().dataset.ready = "false";
  view().replaceChildren(h("p.muted", {}, "Loading…"));
  let nodes;
  try {
    const [head, rest] = [path.split("/")[0], decodeURIComponent(path.split("/").slice(1).join("/"))];
    if (head === "" || head === "refs") nodes = await refsView(params);
    else if (head === "chain") nodes = await chainView(params);
    else if (head === "commit") nodes = await commitView(rest);
    else if (head === "compare") nodes = await compareView(params);
    else if (head === "travel") nodes = await travelView(params);
    else if (head === "agents") nodes = await agentView(rest);
    else if (head === "workspaces") nodes = await workspaceView(rest);
    else nodes = [h("h1", {}, "Not a view"), h("p", {}, "This page has no view at ", h("code", {}, location.pathname), ". ", link("/ui", "Sessions and refs"))];
  } catch (e) {
    nodes = [h("h1", {}, "Could not load this view"), errorBox(e)];
  }
  if (mine !== rendering) return;
  view().replaceChildren(...nodes);
  document.title = `${$("h1", view())?.textContent ?? "ctx"} · ctx`;
  view().focus();
  view().dataset.ready = "true";
}

document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a[data-nav]");
  if (!a || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.button !== 0) return;
  ev.preventDefault();
  navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", render);
setupLogin();
render();
