// Automatic prefix caching over a paged KV pool (vLLM's design): every full page a sequence has computed is kept in
// an index under the hash of its token prefix, hash(parent page's hash, this page's token ids), so a later sequence
// whose ids start the same way shares those pages instead of computing them again. The pool counts references per
// page; a cached page nobody references stays in the index (least recently used first in line) and is only evicted
// when the pool runs out of free pages, so the cache lives inside the --kv-memory budget. A shared page is never
// written: a sequence writes only past its cached prefix, and the scheduler copies a page before writing into it.
//
// A model with recurrent layers (Gated DeltaNet) cannot restart from KV pages alone: its state at the boundary is
// needed too. Such an entry may carry a snapshot slot, a copy of the sequence's state taken when the page was
// completed exactly at the end of a forward; a hit for such a model ends at the deepest page that has one.
// Snapshots are few (each is a whole recurrent state), so they are evicted least recently used on their own.

/** One cached page: its place in the hash chain, its tokens (to check a hash match), its page in the pool. */
export interface PrefixEntry {
  readonly key: string;
  /** The key of the page before it ('' for a sequence's first page). */
  readonly parent: string;
  readonly tokens: readonly number[];
  readonly page: number;
  /** A state slot holding the recurrent state after this page's last token (models with recurrent layers). */
  snapshot: number | undefined;
}

/** Hash of (parent key, a page's token ids): two 32-bit mixes, 64 bits as a string key; matches are then checked. */
export function pageKey(parent: string, tokens: readonly number[]): string {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  const mix = (x: number) => {
    a = Math.imul(a ^ x, 0x01000193);
    b = Math.imul(b ^ x, 0x5bd1e995);
    b ^= b >>> 15;
  };
  for (let i = 0; i < parent.length; i++) mix(parent.charCodeAt(i));
  mix(0x2f2f);
  for (const t of tokens) {
    mix(t & 0xffff);
    mix(t >>> 16);
  }
  return (a >>> 0).toString(36) + '.' + (b >>> 0).toString(36);
}

/** The state-slot side of snapshots (DeltaNetStateSlots implements it). */
export interface StateSnapshots {
  readonly freeSnapshots: number;
  takeSnapshot(): number | undefined;
  giveSnapshot(slot: number): void;
  /** Copies slot `from`'s state into slot `to` (sequence and snapshot slots alike). */
  copy(from: number, to: number): void;
}

export class PrefixCache {
  private readonly byKey = new Map<string, PrefixEntry>();
  private readonly byPage = new Map<number, PrefixEntry>();
  /** Cached pages no sequence references, least recently used first (a Map keeps insertion order). */
  private readonly lru = new Map<number, PrefixEntry>();
  /** Entries holding a snapshot, least recently used first. */
  private readonly snapshotLru = new Map<string, PrefixEntry>();
  /** Prompt tokens served from cached pages since the cache was made. */
  hitTokens = 0;

  constructor(
    readonly pageSize: number,
    /** Where snapshots live, for models with recurrent layers; undefined for attention-only models. */
    readonly snapshots?: StateSnapshots,
  ) {}

  /** Pages in the index (referenced or not). */
  get size(): number {
    return this.byKey.size;
  }

  /** Cached pages no sequence references: the pool may evict them for new pages. */
  get evictable(): number {
    return this.lru.size;
  }

  holds(page: number): boolean {
    return this.byPage.has(page);
  }

  entryOfPage(page: number): PrefixEntry | undefined {
    return this.byPage.get(page);
  }

  /** The longest chain of cached full pages `ids` starts with (each match checked against its tokens and parent). */
  match(ids: readonly number[]): PrefixEntry[] {
    const out: PrefixEntry[] = [];
    let parent = '';
    for (let p = 0; (p + 1) * this.pageSize <= ids.length; p++) {
      const tokens = ids.slice(p * this.pageSize, (p + 1) * this.pageSize);
      const entry = this.byKey.get(pageKey(parent, tokens));
      if (!entry || entry.parent !== parent || !sameTokens(entry.tokens, tokens)) break;
      out.push(entry);
      parent = entry.key;
    }
    return out;
  }

  /**
   * Puts a sequence's completed page in the index under its prefix; returns the entry now under that key (the
   * existing one when another sequence cached the same prefix first: this page then stays the sequence's own).
   */
  insert(parent: string, tokens: readonly number[], page: number): PrefixEntry {
    const key = pageKey(parent, tokens);
    const existing = this.byKey.get(key);
    if (existing) return existing;
    if (this.byPage.has(page)) throw new Error(`PrefixCache: page ${page} is cached already`);
    const entry: PrefixEntry = { key, parent, tokens: [...tokens], page, snapshot: undefined };
    this.byKey.set(key, entry);
    this.byPage.set(page, entry);
    return entry;
  }

  /** A cached page's last reference went away: it waits in LRU order for a hit or an eviction. */
  unreferenced(page: number): void {
    const entry = this.byPage.get(page);
    if (entry) this.lru.set(page, entry);
  }

  /** A cached page is referenced again (a hit): it leaves the eviction line. */
  referenced(page: number): void {
    this.lru.delete(page);
  }

  /** Evicts the n least recently used unreferenced pages from the index; returns them, free for reuse. */
  evict(n: number): number[] {
    const out: number[] = [];
    for (const [page, entry] of this.lru) {
      if (out.length >= n) break;
      this.lru.delete(page);
      this.remove(entry);
      out.push(page);
    }
    return out;
  }

  /** Keeps slot `from`'s state as the entry's snapshot (evicting the least recently used snapshot if none is free). */
  snapshot(entry: PrefixEntry, from: number): void {
    const s = this.snapshots;
    if (!s || entry.snapshot !== undefined || !this.byKey.has(entry.key)) return;
    let slot = s.takeSnapshot();
    if (slot === undefined) {
      const oldest = this.snapshotLru.values().next().value;
      if (!oldest) return;
      this.dropSnapshot(oldest);
      slot = s.takeSnapshot();
      if (slot === undefined) return;
    }
    s.copy(from, slot);
    entry.snapshot = slot;
    this.snapshotLru.set(entry.key, entry);
  }

  /** Copies the entry's snapshot into a sequence's state slot. */
  restore(entry: PrefixEntry, to: number): void {
    if (entry.snapshot === undefined) throw new Error(`PrefixCache: page ${entry.page} has no state snapshot`);
    this.snapshots!.copy(entry.snapshot, to);
    this.snapshotLru.delete(entry.key);
    this.snapshotLru.set(entry.key, entry);
  }

  /** Counts a hit and marks its pages recently used. */
  hit(entries: readonly PrefixEntry[], tokens: number): void {
    this.hitTokens += tokens;
    for (const e of entries) {
      if (e.snapshot === undefined) continue;
      this.snapshotLru.delete(e.key);
      this.snapshotLru.set(e.key, e);
    }
  }

  private dropSnapshot(entry: PrefixEntry): void {
    if (entry.snapshot === undefined) return;
    this.snapshots!.giveSnapshot(entry.snapshot);
    entry.snapshot = undefined;
    this.snapshotLru.delete(entry.key);
  }

  private remove(entry: PrefixEntry): void {
    this.dropSnapshot(entry);
    this.byKey.delete(entry.key);
    this.byPage.delete(entry.page);
  }
}

function sameTokens(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}
