// Files read by URL, optionally kept in the browser (`{ cache: true }` on Checkpoint.fromUrl, SafetensorsFile.fromUrl
// and fetchText) so that the next load of the same model reads no network at all: weight files are downloaded whole
// into the store on first use (Range requests, with progress) and read back from the local copy; config, index and
// tokenizer files are kept too, and so is a 404, so that reopening a cached folder probes nothing.
//
// Caching is best effort: where no store exists (Node, an insecure page) or the store fails (a full disk or quota),
// reads go to the network as without a cache. Entries are trusted, never revalidated (that would be a request):
// clearWeightCache() empties the cache, or the entries under one URL prefix, when a model changes at its URL.
import { CheckpointError } from '../core/errors.js';
import { blobSource, urlSource, type ByteSource, type UrlSourceOptions } from './byte-source.js';
import { downloadByRanges } from './range-download.js';
import { openCacheStore, WEIGHT_CACHE_STORES, type CacheStore, type WeightCacheStoreKind } from './weight-cache-store.js';

export type { WeightCacheStoreKind };

/** Where a cached URL's bytes came from on this open. */
export interface CachedFileEvent {
  readonly url: string;
  readonly bytes: number;
  readonly store: WeightCacheStoreKind;
  /** 'cache': a complete copy, no request; 'downloaded': fetched whole and stored now; 'network': the store failed, read by Range requests. */
  readonly from: 'cache' | 'downloaded' | 'network';
}

export interface WeightCacheOptions {
  /** 'auto' (the default): OPFS where the page can write it, else the Cache API, else no caching. */
  store?: WeightCacheStoreKind | 'auto';
  /** Progress of a file being downloaded into the cache. */
  onDownload?: (progress: { readonly url: string; readonly done: number; readonly total: number }) => void;
  /** Each weight file as it is opened: from the cache or from the network. */
  onFile?: (event: CachedFileEvent) => void;
}

export interface CachedUrlOptions extends UrlSourceOptions {
  /** Keep what is read in the browser: true (the best store there is), a store kind, or options. Off by default. */
  cache?: boolean | WeightCacheStoreKind | WeightCacheOptions;
}

export interface WeightCacheEntry {
  readonly url: string;
  readonly bytes: number;
  readonly store: WeightCacheStoreKind;
  readonly storedAt: string;
  readonly etag?: string;
}

export interface WeightCacheUsage {
  readonly files: number;
  readonly bytes: number;
  readonly entries: readonly WeightCacheEntry[];
}

interface OpenCache extends Omit<WeightCacheOptions, 'store'> {
  readonly store: CacheStore;
}

/** The store that `cache` asks for, or undefined for none (not asked, or none in this runtime). */
async function openCache(cache: CachedUrlOptions['cache']): Promise<OpenCache | undefined> {
  if (cache === undefined || cache === false) return undefined;
  const options: WeightCacheOptions = cache === true ? {} : typeof cache === 'string' ? { store: cache } : cache;
  const kinds = options.store === undefined || options.store === 'auto' ? WEIGHT_CACHE_STORES : [options.store];
  for (const kind of kinds) {
    const store = await openCacheStore(kind);
    if (store) return { ...options, store };
  }
  return undefined;
}

/** The entry for url, treating a store that cannot be read like an empty one. */
async function lookup(cache: OpenCache | undefined, url: string) {
  return cache?.store.get(url).catch(() => undefined);
}

/**
 * The bytes at url: the cached copy when there is a complete one (no request), else with a cache the whole file
 * downloaded into it (once `check` has accepted it over the network, so a file that is not what it should be is
 * refused after a few small reads, never downloaded whole), else Range requests as urlSource.
 */
export async function cachedUrlSource(url: string, options: CachedUrlOptions = {}, check?: (remote: ByteSource) => Promise<void>): Promise<ByteSource> {
  const cache = await openCache(options.cache);
  if (!cache) return urlSource(url, options);
  const report = (from: CachedFileEvent['from'], bytes: number) => cache.onFile?.({ url, bytes, store: cache.store.kind, from });
  const hit = await lookup(cache, url);
  if (hit && !hit.meta.absent) {
    report('cache', hit.meta.size);
    return blobSource(hit.blob);
  }
  const remote = await urlSource(url, options);
  await check?.(remote);
  let stored: Blob;
  try {
    stored = await cache.store.put(url, (write) =>
      downloadByRanges(url, remote.size, write, { ...options, onProgress: (done, total) => cache.onDownload?.({ url, done, total }) }),
    );
  } catch (e) {
    // A CheckpointError is the network's or the file's and fails the load; anything else is the store's.
    if (e instanceof CheckpointError) throw e;
    report('network', remote.size);
    return remote;
  }
  report('downloaded', stored.size);
  return blobSource(stored);
}

/** A text file at url (config.json, an index, tokenizer files), or undefined on 404; kept when options.cache asks. */
export async function fetchText(url: string, options: CachedUrlOptions = {}): Promise<string | undefined> {
  const cache = await openCache(options.cache);
  const hit = await lookup(cache, url);
  if (hit) return hit.meta.absent ? undefined : hit.blob.text();
  const res = await request(url, options);
  if (res.status === 404) {
    await res.body?.cancel();
    await cache?.store.putAbsent(url).catch(() => {});
    return undefined;
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new CheckpointError(`HTTP ${res.status}`, { file: url });
  }
  const text = await res.text();
  const bytes = new TextEncoder().encode(text);
  const facts = { size: bytes.length, etag: res.headers.get('etag') ?? undefined, lastModified: res.headers.get('last-modified') ?? undefined };
  await cache?.store.put(url, async (write) => (await write(bytes), facts)).catch(() => {});
  return text;
}

/** Whether url exists: a cached entry answers without a request, else a one-byte Range request (a 404 is kept). */
export async function urlExists(url: string, options: CachedUrlOptions = {}): Promise<boolean> {
  const cache = await openCache(options.cache);
  const hit = await lookup(cache, url);
  if (hit) return !hit.meta.absent;
  const res = await request(url, options, { Range: 'bytes=0-0' });
  await res.body?.cancel();
  if (res.status === 404) {
    await cache?.store.putAbsent(url).catch(() => {});
    return false;
  }
  if (res.ok) return true;
  throw new CheckpointError(`HTTP ${res.status}`, { file: url });
}

async function request(url: string, options: UrlSourceOptions, headers: Record<string, string> = {}): Promise<Response> {
  try {
    return await (options.fetch ?? fetch)(url, { headers: { ...options.headers, ...headers } });
  } catch (e) {
    throw new CheckpointError(`cannot fetch: ${(e as Error).message}`, { file: url });
  }
}

/** Empties the weight cache in every store, or only the entries whose URL starts with `urlPrefix` (one model). */
export async function clearWeightCache(urlPrefix?: string): Promise<void> {
  for (const store of await availableStores()) {
    if (urlPrefix === undefined) await store.clear();
    else for (const meta of await store.list()) if (meta.url.startsWith(urlPrefix)) await store.remove(meta.url);
  }
}

/** What the weight cache holds, over every store (remembered 404s are not files and are left out). */
export async function weightCacheUsage(): Promise<WeightCacheUsage> {
  const entries: WeightCacheEntry[] = [];
  for (const store of await availableStores()) {
    for (const m of await store.list()) if (!m.absent) entries.push({ url: m.url, bytes: m.size, store: store.kind, storedAt: m.storedAt, etag: m.etag });
  }
  return { files: entries.length, bytes: entries.reduce((n, e) => n + e.bytes, 0), entries };
}

async function availableStores(): Promise<CacheStore[]> {
  const stores = await Promise.all(WEIGHT_CACHE_STORES.map(openCacheStore));
  return stores.filter((s): s is CacheStore => s !== undefined);
}
