import { mkdir, readFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { ListFileEntry } from '@huggingface/hub';
import { hubCacheDir, hubEndpoint, hubOffline, hubToken } from './cache-dir.js';
import { blobPath, linkSnapshotFile, missingFromSnapshot, pathExists, readRef, repoStorageDir, snapshotDir, writeRef } from './cache-layout.js';
import { fetchBlob } from './blob-fetch.js';
import { withBlobLock } from './blob-lock.js';
import { listRepoFiles, resolveCommit, type HubClient } from './hub-api.js';
import { HubError } from './hub-errors.js';
import { metadataFiles, shardsOfIndex, weightFiles, weightIndexFiles } from './model-files.js';
import { isCommitHash, parseRepoSpec, type RepoSpec } from './repo-spec.js';

export interface DownloadProgress {
  /** Repo-relative path of the file being transferred. */
  readonly file: string;
  readonly fileBytes: number;
  readonly fileTotal: number;
  /** Bytes of all files this call transfers; `total` grows once, after the weight index says which shards. */
  readonly bytes: number;
  readonly total: number;
}

export interface HubOptions {
  /** Default: hubCacheDir(env). */
  readonly cacheDir?: string;
  /** Default: hubToken(env). */
  readonly token?: string;
  /** Default: hubEndpoint(env). */
  readonly endpoint?: string;
  /** Use the cache only; default: HF_HUB_OFFLINE. */
  readonly offline?: boolean;
  readonly fetch?: typeof fetch;
  readonly onProgress?: (p: DownloadProgress) => void;
  /** Where HF_* variables are read; default process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * A local folder holding the model `spec` names. A path that exists is returned as is; otherwise `spec` is a Hub
 * repo spec (org/name[@revision][/subfolder]) and the result is snapshots/<commit>[/<subfolder>] in the Hugging
 * Face cache, after fetching whatever config, tokenizer and safetensors files it lacks.
 */
export async function resolveModelPath(spec: string, options: HubOptions = {}): Promise<string> {
  if (await pathExists(spec)) return spec;
  const parsed = parseRepoSpec(spec);
  // Not a repo id (an absolute or ./ path, a bare name): the caller opens it and names the missing path.
  if (!parsed) return spec;
  const env = options.env ?? process.env;
  const client: HubClient = {
    repo: parsed.repo,
    endpoint: (options.endpoint ?? hubEndpoint(env)).replace(/\/+$/, ''),
    token: options.token ?? hubToken(env),
    fetch: options.fetch ?? fetch,
  };
  const storage = repoStorageDir(options.cacheDir ?? hubCacheDir(env), parsed.repo);
  const offline = options.offline ?? hubOffline(env);
  const revision = parsed.revision ?? 'main';
  const label = `${parsed.repo}@${revision}`;

  const commit = await commitOf(client, storage, revision, offline);
  const folder = snapshotDir(storage, commit, parsed.subfolder);
  const missing = await checkedMissing(client, folder);
  if (missing.length === 0) return folder;
  if (offline) {
    throw new HubError(`${label}: '${missing[0]}' is not in the cache (${folder}) and HF_HUB_OFFLINE=1 is set; ` + `unset HF_HUB_OFFLINE to download it`, {
      repo: parsed.repo,
    });
  }
  await fetchModelFiles(client, storage, commit, parsed, options.onProgress);
  const stillMissing = await checkedMissing(client, folder);
  if (stillMissing.length > 0) {
    throw new HubError(`${label}${parsed.subfolder ? `/${parsed.subfolder}` : ''} has no ${stillMissing.join(', ')}: not a safetensors model folder`, {
      repo: parsed.repo,
    });
  }
  return folder;
}

/** The commit to use: the revision itself when it is one, the cached ref offline, else the Hub's answer. */
async function commitOf(client: HubClient, storage: string, revision: string, offline: boolean): Promise<string> {
  if (isCommitHash(revision)) return revision;
  if (offline) {
    const cached = await readRef(storage, revision);
    if (cached) return cached;
    throw new HubError(
      `${client.repo}@${revision} is not in the cache (no ${join(storage, 'refs', revision)}) and HF_HUB_OFFLINE=1 is set; ` +
        `unset HF_HUB_OFFLINE to download it`,
      { repo: client.repo },
    );
  }
  try {
    const commit = await resolveCommit(client, revision);
    await writeRef(storage, revision, commit);
    return commit;
  } catch (e) {
    // As huggingface_hub does: with no network (not an HTTP refusal), a complete cached snapshot still serves.
    const cached = e instanceof HubError && e.status === undefined ? await readRef(storage, revision) : undefined;
    if (cached && (await missingFromSnapshot(snapshotDir(storage, cached))).length === 0) return cached;
    throw e;
  }
}

async function checkedMissing(client: HubClient, folder: string): Promise<string[]> {
  try {
    return await missingFromSnapshot(folder);
  } catch (e) {
    throw new HubError(`cached ${client.repo} snapshot ${folder} is unusable: ${(e as Error).message}`, { repo: client.repo });
  }
}

const PARALLEL_TRANSFERS = 4;

const sizeOfEntry = (e: ListFileEntry): number => e.lfs?.size ?? e.size;

/** Sums the bytes of finished and in-flight files into one running figure for onProgress. */
class ProgressTally {
  total = 0;
  private done = 0;
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly onProgress: HubOptions['onProgress']) {}

  report(file: string, fileBytes: number, fileTotal: number): void {
    this.inFlight.set(file, fileBytes);
    if (!this.onProgress) return;
    let bytes = this.done;
    for (const b of this.inFlight.values()) bytes += b;
    this.onProgress({ file, fileBytes, fileTotal, bytes, total: this.total });
  }

  finish(file: string, size: number): void {
    this.inFlight.delete(file);
    this.done += size;
  }
}

/** Fetches metadata files and indexes first (the index decides the shards), then the weights. */
async function fetchModelFiles(client: HubClient, storage: string, commit: string, spec: RepoSpec, onProgress: HubOptions['onProgress']): Promise<void> {
  const entries = await listRepoFiles(client, commit, spec.subfolder);
  const byPath = new Map(entries.map((e) => [e.path, e]));
  const paths = [...byPath.keys()];
  const progress = new ProgressTally(onProgress);

  const ensureAll = async (files: string[]): Promise<void> => {
    const todo: ListFileEntry[] = [];
    for (const file of files) {
      const entry = byPath.get(file);
      if (!entry) {
        throw new HubError(`${client.repo}@${commit}: the weight index names '${file}', which the repo does not have`, { repo: client.repo });
      }
      if (!(await pathExists(join(storage, 'snapshots', commit, file)))) todo.push(entry);
    }
    progress.total += todo.reduce((n, e) => n + sizeOfEntry(e), 0);
    // A few transfers at once, as huggingface_hub does (8 workers): one connection rarely fills the link.
    // After a failure no new file starts, and the call returns only once the others stopped, so no transfer
    // keeps writing a .incomplete behind the caller's back (a retry would then write the same file twice).
    let next = 0;
    let failure: { error: unknown } | undefined;
    const worker = async (): Promise<void> => {
      while (!failure && next < todo.length) {
        try {
          await ensureFile(client, storage, commit, todo[next++], progress);
        } catch (error) {
          failure ??= { error };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL_TRANSFERS, todo.length) }, worker));
    if (failure) throw failure.error;
  };

  await ensureAll(metadataFiles(paths, spec.subfolder));
  const shardsByIndex = new Map<string, string[]>();
  for (const index of weightIndexFiles(paths, spec.subfolder)) {
    const file = join(storage, 'snapshots', commit, index);
    try {
      shardsByIndex.set(index, shardsOfIndex(JSON.parse(await readFile(file, 'utf8')), index, client.repo));
    } catch (e) {
      throw new HubError(`${client.repo}@${commit}: ${index} is not a usable weight index: ${(e as Error).message}`, { repo: client.repo });
    }
  }
  await ensureAll(weightFiles(paths, spec.subfolder, shardsByIndex));
}

/** Links snapshots/<commit>/<path> to its blob, transferring the blob only when no snapshot has it yet. */
async function ensureFile(client: HubClient, storage: string, commit: string, entry: ListFileEntry, progress: ProgressTally): Promise<void> {
  const etag = entry.lfs?.oid ?? entry.oid;
  if (!etag || !/^[0-9a-f]{40,64}$/.test(etag)) {
    throw new HubError(`${client.repo}@${commit}: the Hub listing gives no usable oid for ${entry.path} (${JSON.stringify(etag)})`, { repo: client.repo });
  }
  const size = sizeOfEntry(entry);
  const blob = blobPath(storage, etag);
  const lock = join(dirname(storage), '.locks', basename(storage), `${etag}.tensorgpu-lock`);
  await withBlobLock(
    lock,
    () => pathExists(blob),
    async () => {
      await mkdir(join(storage, 'blobs'), { recursive: true });
      const url = `${client.endpoint}/${client.repo}/resolve/${commit}/${entry.path.split('/').map(encodeURIComponent).join('/')}`;
      const report = (fileBytes: number): void => progress.report(entry.path, fileBytes, size);
      await fetchBlob(client, url, blob, { file: entry.path, size, ...(entry.lfs ? { sha256: entry.lfs.oid } : { gitSha1: entry.oid }) }, report);
    },
  );
  progress.finish(entry.path, size);
  await linkSnapshotFile(storage, commit, entry.path, etag);
}
