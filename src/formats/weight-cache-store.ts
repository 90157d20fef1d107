// Where the browser weight cache (weight-cache.ts) keeps its copies: the Origin Private File System, one real file
// per entry read back as a disk-backed File, or, where a page cannot write OPFS (Safari writes it only through sync
// handles in workers), the Cache API. Node has neither: there is no store and reads go to the network.
//
// An entry is complete or absent, never partial: OPFS data is written through createWritable(), whose bytes appear
// only when close() commits them, and the entry's description (size, ETag) is written after that commit and removed
// before any rewrite; a Cache API response is put only once its body is whole. A description whose size disagrees
// with the data is a miss. Entries are trusted without asking the server (a cached load makes no request at all),
// so a file changed at the same URL is seen only after clearWeightCache().

/** The store kinds, in the order 'auto' tries them. */
export const WEIGHT_CACHE_STORES = ['opfs', 'cache-api'] as const;
export type WeightCacheStoreKind = (typeof WEIGHT_CACHE_STORES)[number];

/** The OPFS folder and the Cache API cache that hold the entries (one name, so clearing one clears all). */
const STORE_NAME = 'tensorgpu-weights';

/** What is known about a cached URL. */
export interface CacheEntryMeta {
  readonly url: string;
  /** Bytes of the complete copy. */
  readonly size: number;
  readonly etag?: string;
  readonly lastModified?: string;
  /** When the copy was completed (ISO 8601). */
  readonly storedAt: string;
  /** The server answered 404: remembered, so that a cached folder is reopened without probing for its files. */
  readonly absent?: boolean;
}

/** The facts a download or text fetch hands over with its bytes. */
export type StoredFacts = Pick<CacheEntryMeta, 'size' | 'etag' | 'lastModified'>;

export interface CacheEntry {
  readonly meta: CacheEntryMeta;
  /** The complete copy (empty for an absent entry). */
  readonly blob: Blob;
}

/** Appends bytes to the entry being written; a Uint8Array may be reused by the caller once the promise settles. */
export type WritePart = (part: Uint8Array | Blob) => Promise<void>;

export interface CacheStore {
  readonly kind: WeightCacheStoreKind;
  /** The complete entry for url, or undefined when there is none. */
  get(url: string): Promise<CacheEntry | undefined>;
  /**
   * Stores what `fill` writes as url's copy and returns it (disk-backed where the store allows). Nothing is stored
   * unless fill resolves, with the size it wrote.
   */
  put(url: string, fill: (write: WritePart) => Promise<StoredFacts>): Promise<Blob>;
  /** Remembers that url does not exist. */
  putAbsent(url: string): Promise<void>;
  /** Every entry (absent ones included). */
  list(): Promise<CacheEntryMeta[]>;
  remove(url: string): Promise<void>;
  /** Removes every entry. */
  clear(): Promise<void>;
}

/** The store of a kind, or undefined where this runtime has none (Node, an insecure page, a private window). */
export async function openCacheStore(kind: WeightCacheStoreKind): Promise<CacheStore | undefined> {
  return kind === 'opfs' ? opfsStore() : cacheApiStore();
}

// The few OPFS and Cache API shapes used here, declared locally: the project compiles without lib.dom.
interface OpfsWritable {
  write(data: Uint8Array | Blob | string): Promise<void>;
  close(): Promise<void>;
  abort(): Promise<void>;
}
interface OpfsFile {
  getFile(): Promise<Blob>;
  createWritable(): Promise<OpfsWritable>;
}
interface OpfsDirectory {
  getDirectoryHandle(name: string, options?: { create?: boolean }): Promise<OpfsDirectory>;
  getFileHandle(name: string, options?: { create?: boolean }): Promise<OpfsFile>;
  removeEntry(name: string, options?: { recursive?: boolean }): Promise<void>;
  keys(): AsyncIterable<string>;
}
interface ResponseCache {
  match(key: string): Promise<Response | undefined>;
  put(key: string, response: Response): Promise<void>;
  delete(key: string): Promise<boolean>;
  keys(): Promise<readonly { readonly url: string }[]>;
}
interface CacheStorageLike {
  open(name: string): Promise<ResponseCache>;
  delete(name: string): Promise<boolean>;
}

async function opfsStore(): Promise<CacheStore | undefined> {
  const g = globalThis as {
    navigator?: { storage?: { getDirectory?: () => Promise<OpfsDirectory> } };
    FileSystemFileHandle?: { prototype: { createWritable?: unknown } };
  };
  const storage = g.navigator?.storage;
  if (typeof storage?.getDirectory !== 'function' || typeof g.FileSystemFileHandle?.prototype.createWritable !== 'function') return undefined;
  let root: OpfsDirectory;
  try {
    root = await storage.getDirectory();
  } catch {
    return undefined; // refused: an insecure context, or a private window in some browsers
  }
  const folder = () => root.getDirectoryHandle(STORE_NAME, { create: true });
  const writeText = async (dir: OpfsDirectory, name: string, text: string) => {
    const w = await (await dir.getFileHandle(name, { create: true })).createWritable();
    await w.write(text);
    await w.close();
  };
  const readMeta = async (dir: OpfsDirectory, name: string): Promise<CacheEntryMeta | undefined> => {
    try {
      return parseMeta(await (await (await dir.getFileHandle(name)).getFile()).text());
    } catch {
      return undefined; // NotFoundError: not cached (or a description removed for a rewrite)
    }
  };
  const removeQuietly = (dir: OpfsDirectory, name: string) => dir.removeEntry(name).catch(() => {});
  return {
    kind: 'opfs',
    async get(url) {
      const [dir, key] = await Promise.all([folder(), keyOf(url)]);
      const meta = await readMeta(dir, `${key}.json`);
      if (meta?.url !== url) return undefined;
      if (meta.absent) return { meta, blob: new Blob([]) };
      try {
        const blob = await (await dir.getFileHandle(`${key}.bin`)).getFile();
        return blob.size === meta.size ? { meta, blob } : undefined;
      } catch {
        return undefined;
      }
    },
    async put(url, fill) {
      const [dir, key] = await Promise.all([folder(), keyOf(url)]);
      // The description goes first: from here until the new one is written the entry reads as missing.
      await removeQuietly(dir, `${key}.json`);
      const handle = await dir.getFileHandle(`${key}.bin`, { create: true });
      const writable = await handle.createWritable();
      let facts: StoredFacts;
      try {
        facts = await fill((part) => writable.write(part));
        await writable.close();
      } catch (e) {
        await writable.abort().catch(() => {});
        throw e;
      }
      const blob = await handle.getFile();
      if (blob.size !== facts.size) throw new Error(`stored ${blob.size} bytes of ${url}, expected ${facts.size}`);
      await writeText(dir, `${key}.json`, JSON.stringify(describe(url, facts)));
      return blob;
    },
    async putAbsent(url) {
      const [dir, key] = await Promise.all([folder(), keyOf(url)]);
      await removeQuietly(dir, `${key}.bin`);
      await writeText(dir, `${key}.json`, JSON.stringify({ ...describe(url, { size: 0 }), absent: true }));
    },
    async list() {
      const dir = await folder();
      const metas: CacheEntryMeta[] = [];
      for await (const name of dir.keys()) {
        const meta = name.endsWith('.json') ? await readMeta(dir, name) : undefined;
        if (meta) metas.push(meta);
      }
      return metas;
    },
    async remove(url) {
      const [dir, key] = await Promise.all([folder(), keyOf(url)]);
      await removeQuietly(dir, `${key}.json`);
      await removeQuietly(dir, `${key}.bin`);
    },
    async clear() {
      await root.removeEntry(STORE_NAME, { recursive: true }).catch((e: Error) => {
        if (e.name !== 'NotFoundError') throw e;
      });
    },
  };
}

/** Header carrying an entry's description on its cached response (URI-encoded: header values are Latin-1 only). */
const META_HEADER = 'x-tensorgpu-entry';

async function cacheApiStore(): Promise<CacheStore | undefined> {
  const storage = (globalThis as { caches?: CacheStorageLike }).caches;
  if (typeof storage?.open !== 'function') return undefined;
  let cache: ResponseCache;
  try {
    cache = await storage.open(STORE_NAME);
  } catch {
    return undefined; // refused: an insecure context or an opaque origin
  }
  const metaOf = (res: Response) => parseMeta(decodeURIComponent(res.headers.get(META_HEADER) ?? ''));
  const putEntry = (meta: CacheEntryMeta, body: Blob) =>
    cache.put(
      meta.url,
      new Response(body, { headers: { 'content-type': 'application/octet-stream', [META_HEADER]: encodeURIComponent(JSON.stringify(meta)) } }),
    );
  const get = async (url: string): Promise<CacheEntry | undefined> => {
    const res = await cache.match(url);
    const meta = res && metaOf(res);
    if (!res || meta?.url !== url) {
      await res?.body?.cancel();
      return undefined;
    }
    const blob = await res.blob();
    return meta.absent || blob.size === meta.size ? { meta, blob } : undefined;
  };
  return {
    kind: 'cache-api',
    get,
    async put(url, fill) {
      const parts: Blob[] = [];
      // Copied into Blobs as they come: the caller reuses its buffers, and the browser may keep large Blobs on disk.
      const facts = await fill(async (part) => void parts.push(part instanceof Blob ? part : new Blob([part])));
      const body = new Blob(parts);
      if (body.size !== facts.size) throw new Error(`collected ${body.size} bytes of ${url}, expected ${facts.size}`);
      await putEntry(describe(url, facts), body);
      // Read back from the cache, so reads go to its copy rather than to the parts held in this page.
      return (await get(url))?.blob ?? body;
    },
    async putAbsent(url) {
      await putEntry({ ...describe(url, { size: 0 }), absent: true }, new Blob([]));
    },
    async list() {
      const metas: CacheEntryMeta[] = [];
      for (const req of await cache.keys()) {
        const res = await cache.match(req.url);
        const meta = res && metaOf(res);
        await res?.body?.cancel();
        if (meta) metas.push(meta);
      }
      return metas;
    },
    async remove(url) {
      await cache.delete(url);
    },
    async clear() {
      await storage.delete(STORE_NAME);
      cache = await storage.open(STORE_NAME);
    },
  };
}

function describe(url: string, facts: StoredFacts): CacheEntryMeta {
  return { url, size: facts.size, etag: facts.etag, lastModified: facts.lastModified, storedAt: new Date().toISOString() };
}

function parseMeta(text: string): CacheEntryMeta | undefined {
  try {
    const m = JSON.parse(text) as Partial<CacheEntryMeta> | null;
    return typeof m?.url === 'string' && Number.isSafeInteger(m.size) && m.size! >= 0 ? (m as CacheEntryMeta) : undefined;
  } catch {
    return undefined;
  }
}

/** A file name for a URL (which may be long and hold any character): its SHA-256, hex. */
async function keyOf(url: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(url)));
  return [...digest].map((b) => b.toString(16).padStart(2, '0')).join('');
}
