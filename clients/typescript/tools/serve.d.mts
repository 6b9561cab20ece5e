import type { ChildProcess } from "node:child_process";

/** Starts `ctx serve` with its data in `data`; its process, URL and token once it listens. */
export function startServe(ctx: string, data: string): Promise<{ proc: ChildProcess; url: string; token: string }>;
/** Stops a server `startServe` started, and waits until it has exited. */
export function stopServe(proc: ChildProcess): Promise<void>;
