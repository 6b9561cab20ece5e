// What the tests share: the live server tests/typescript/run started, and
// names no other test (or run) uses.
import { randomUUID } from "node:crypto";

import { Client } from "../src/client.js";

/** The server under test: CTX_TEST_URL and CTX_TEST_TOKEN, set by tests/typescript/run. */
export function live(): { url: string; token: string } {
  const url = process.env.CTX_TEST_URL;
  const token = process.env.CTX_TEST_TOKEN;
  if (!url || !token) throw new Error("no live server: run the tests with tests/typescript/run");
  return { url, token };
}

/** A client of the live server. */
export function client(options: { fetch?: typeof fetch } = {}): Client {
  return new Client({ ...live(), ...options });
}

/** A name no other test uses. */
export function unique(): string {
  return `ts-${randomUUID().replaceAll("-", "").slice(0, 16)}`;
}

/** Whether the live server runs on the AWS store (the emulator). */
export const onAws = process.env.CTX_TEST_STORE === "aws";
