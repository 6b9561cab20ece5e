// Seeds a live ctx server with what the browser's views show: a Claude Code
// session of several turns (text, thinking, a tool call and its result, a
// failed tool call, an image), a compaction on it, a fork of it, an agent,
// and a workspace file. Used by the browser test and by the screenshots.

export const PNG_1x1 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

export function client(url, token) {
  return async function api(method, path, body, contentType = "application/json") {
    const raw = contentType !== "application/json";
    const resp = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": contentType },
      body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
    });
    const text = await resp.text();
    if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

function turn(sid, i, parent, when) {
  const u = `${sid.slice(0, 8)}-u${i}`;
  const a = `${sid.slice(0, 8)}-a${i}`;
  const common = { sessionId: sid, cwd: "/home/dev/demo", version: "2.1.0", isSidechain: false, userType: "external" };
  const user = { ...common, type: "user", uuid: u, parentUuid: parent, timestamp: when(0), message: { role: "user", content: `Question ${i}: what does config.toml say about retries?` } };
  const assistant = {
    ...common,
    type: "assistant",
    uuid: a,
    parentUuid: u,
    timestamp: when(1),
    message: {
      role: "assistant",
      content: [
        { type: "thinking", thinking: `I should read the file before answering question ${i}.` },
        { type: "text", text: `Let me read config.toml (turn ${i}).` },
        { type: "tool_use", id: `toolu_${sid.slice(0, 6)}_${i}`, name: "Read", input: { file_path: "/home/dev/demo/config.toml" } },
      ],
    },
  };
  const failed = i === 2;
  const result = {
    ...common,
    type: "user",
    uuid: `${sid.slice(0, 8)}-r${i}`,
    parentUuid: a,
    timestamp: when(2),
    message: {
      role: "user",
      content: [
        failed
          ? { type: "tool_result", tool_use_id: `toolu_${sid.slice(0, 6)}_${i}`, content: "EACCES: permission denied", is_error: true }
          : { type: "tool_result", tool_use_id: `toolu_${sid.slice(0, 6)}_${i}`, content: `[retry]\nattempts = ${3 + i}\nbackoff = "200ms"` },
        ...(i === 1 ? [{ type: "image", source: { type: "base64", media_type: "image/png", data: PNG_1x1 } }] : []),
      ],
    },
  };
  return { entries: [user, assistant, result], last: result.uuid };
}

const MINUTE = 60_000;
const DAY = 86_400_000;

/**
 * `t` (a Date or milliseconds) as a `datetime-local` value in this
 * process's zone, to the second: what a user types into the page, which
 * reads it in the browser's zone (the same machine's).
 */
export function localInput(t) {
  const d = new Date(t);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/**
 * Seeds one tenant. Returns the names and ids the tests look for.
 * `tag` keeps two seeds on one server apart. The turns are dated from
 * `base` (default: three days before now, on a whole minute), one a
 * minute; the compaction is dated now by the server. No fixed calendar
 * date: the data is as old on any day the tests run.
 */
export async function seed(api, tag, { turns = 4, base = Math.floor((Date.now() - 3 * DAY) / MINUTE) * MINUTE } = {}) {
  const sid = `0f6a1c2e-${tag.padEnd(4, "0").slice(0, 4)}-4000-8000-000000000001`;
  const ref = `claude/-home-dev-demo-${tag}/${sid}`;
  const principal = `alice-${tag}`;
  const commits = [];
  let parent = null;
  let prevUuid = null;
  for (let i = 0; i < turns; i++) {
    const when = (s) => new Date(base + i * MINUTE + s * 1000).toISOString();
    const t = turn(sid, i, prevUuid, when);
    prevUuid = t.last;
    const c = await api("POST", "/v1/commits", {
      commit_type: "delta",
      format: "claude-code-v1",
      template: "claude-code",
      principal,
      checkpoint: "turn_boundary",
      created_at: when(3),
      delta: t.entries.map((e) => JSON.stringify(e) + "\n").join(""),
      parent,
      session_id: sid,
      summary: i === turns - 1 ? null : `Turn ${i}: read config.toml, retries = ${3 + i}`,
      ref: { name: ref, expected: parent },
    });
    commits.push(c);
    parent = c.id;
  }
  // A compaction on the last turn, moving the ref.
  const compaction = (await api("POST", `/v1/commits/${parent}/compact`, { ref: { name: ref, expected: parent } })).commit;
  // A fork: another session continues from turn 1.
  const forkRef = `claude/-home-dev-demo-${tag}/fork`;
  const forkAt = (s) => new Date(base + 60 * MINUTE + s * 1000).toISOString();
  const forkTurn = turn(sid, 9, commits[1].id, forkAt);
  const fork = await api("POST", "/v1/commits", {
    commit_type: "delta",
    format: "claude-code-v1",
    template: "claude-code",
    principal: `bob-${tag}`,
    checkpoint: "turn_boundary",
    created_at: forkAt(5),
    delta: forkTurn.entries.map((e) => JSON.stringify(e) + "\n").join(""),
    parent: commits[1].id,
    session_id: `${sid}-fork`,
    summary: "A fork: tried the other config",
    ref: { name: forkRef, expected: null },
  });
  // An agent and a workspace.
  const agent = `agent-${tag}`;
  await api("PATCH", `/v1/agents/${agent}`, { window_seconds: 3600 });
  await api("POST", `/v1/agents/${agent}/saves`, { description: "before the refactor" });
  const ws = `ws-${tag}`;
  await api("PUT", `/v1/workspaces/${ws}/files/notes/brief.md`, "# Brief\nShip the retry fix.\n", "application/octet-stream");
  return { sid, ref, forkRef, principal, commits, compaction, fork, agent, ws, base };
}
