// Names: any text as one ref-name segment and back (as the Python client's
// ctx_client._names and `ctx hook claude-code` do, so all three name a
// session's ref alike).

const SAFE = /^[A-Za-z0-9-]$/;

/**
 * `value` as one ref-name segment: letters, digits and `-` as they are,
 * every other UTF-8 byte as `_` and two hex digits (`.` is `_2E`); the
 * empty string is `_`. Reversible by `decodeSegment`.
 */
export function encodeSegment(value: string): string {
  if (value === "") return "_";
  let out = "";
  for (const ch of value) {
    if (SAFE.test(ch)) out += ch;
    else for (const b of new TextEncoder().encode(ch)) out += `_${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** The value `encodeSegment` made `segment` from. */
export function decodeSegment(segment: string): string {
  if (segment === "_") return "";
  const bytes: number[] = [];
  for (let i = 0; i < segment.length; ) {
    if (segment[i] === "_") {
      bytes.push(parseInt(segment.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(segment.charCodeAt(i));
      i += 1;
    }
  }
  return new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(bytes));
}
