// `ctx serve` for the tools and benches: on a data directory and a free
// port of 127.0.0.1, resolved once it listens, with the token it wrote.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Starts `ctx serve` with its data in `data`; answers the process, its URL
 * and the token of its data directory once it listens.
 * @param {string} ctx the ctx binary
 * @param {string} data the data directory
 */
export async function startServe(ctx, data) {
  const proc = spawn(ctx, ["serve", "--data", data, "--addr", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  proc.stderr.on("data", (d) => (err += d.toString()));
  const url = await new Promise((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d.toString();
      const m = /^ctx listening on (http:\S+)$/m.exec(out);
      if (m) resolve(m[1]);
    });
    proc.on("exit", (code) => reject(new Error(`ctx serve exited (${code}): ${err}`)));
  });
  return { proc, url, token: readFileSync(join(data, "token"), "utf8").trim() };
}

/**
 * Stops a server `startServe` started, and waits until it has exited.
 * @param {import("node:child_process").ChildProcess} proc
 */
export async function stopServe(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((resolve) => proc.on("exit", () => resolve()));
  proc.kill("SIGTERM");
  await exited;
}
