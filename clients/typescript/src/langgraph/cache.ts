/** A bounded map of immutable things (commit → document, artifact → bytes). */
export class Cache<V> {
  private readonly items = new Map<string, [V, number]>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  get(key: string): V | undefined {
    const hit = this.items.get(key);
    if (hit === undefined) return undefined;
    // Most recently used last: Map keeps insertion order.
    this.items.delete(key);
    this.items.set(key, hit);
    return hit[0];
  }

  put(key: string, value: V, size: number): void {
    if (this.items.has(key)) return;
    this.items.set(key, [value, size]);
    this.bytes += size;
    for (const [k, [, s]] of this.items) {
      if (this.bytes <= this.maxBytes) break;
      this.items.delete(k);
      this.bytes -= s;
    }
  }
}
