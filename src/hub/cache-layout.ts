import { randomBytes } from 'node:crypto';
import { mkdir, readFile, readdir, readlink, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { getRepoFolderName } from '@huggingface/hub';
import { WEIGHT_INDEX_FILES, shardsOfIndex } from './model-files.js';

// huggingface_hub's cache layout, so its CLI (`hf cache scan`), Python code and tensorgpu share one copy:
//   <cache>/models--org--name/refs/<revision>            the commit a branch or tag pointed at when last seen
//   <cache>/models--org--name/blobs/<etag>               file contents, named by LFS sha256 or git blob sha1
//   <cache>/models--org--name/blobs/<etag>.incomplete    a transfer in progress (continued with a Range request)
//   <cache>/models--org--name/snapshots/<commit>/<path>  relative symlinks into blobs/

export function repoStorageDir(cacheDir: string, repo: string): string {
  return join(cacheDir, getRepoFolderName({ type: 'model', name: repo }));
}

export function snapshotDir(storage: string, commit: string, subfolder?: string): string {
  return subfolder ? join(storage, 'snapshots', commit, subfolder) : join(storage, 'snapshots', commit);
}

export function blobPath(storage: string, etag: string): string {
  return join(storage, 'blobs', etag);
}

export async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path); // follows symlinks: a dangling snapshot link counts as missing
    return true;
  } catch {
    return false;
  }
}

/** The commit refs/<revision> holds, or undefined when this revision was never resolved on this machine. */
export async function readRef(storage: string, revision: string): Promise<string | undefined> {
  try {
    const commit = (await readFile(join(storage, 'refs', revision), 'utf8')).trim();
    return commit === '' ? undefined : commit;
  } catch {
    return undefined;
  }
}

/** Writes refs/<revision> = commit (no newline, as huggingface_hub does), atomically, only when it changed. */
export async function writeRef(storage: string, revision: string, commit: string): Promise<void> {
  if ((await readRef(storage, revision)) === commit) return;
  const file = join(storage, 'refs', revision);
  await mkdir(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`; // unique per call, not just per process
  await writeFile(tmp, commit);
  await rename(tmp, file);
}

/** Points snapshots/<commit>/<path> at its blob with a relative link, so the cache folder can be moved whole. */
export async function linkSnapshotFile(storage: string, commit: string, path: string, etag: string): Promise<string> {
  const pointer = join(storage, 'snapshots', commit, path);
  await mkdir(dirname(pointer), { recursive: true });
  const target = relative(dirname(pointer), blobPath(storage, etag));
  for (let tries = 0; ; tries++) {
    try {
      await symlink(target, pointer);
      return pointer;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || tries > 0) throw e;
      // Another call linked it first (fine), or a dangling link from an earlier, deleted blob is in the way.
      if ((await readlink(pointer).catch(() => undefined)) === target) return pointer;
      await rm(pointer, { force: true });
    }
  }
}

/**
 * What a snapshot folder still lacks to load a model, judged from the folder alone so that a cached model needs
 * no listing from the Hub: every shard a weight index names, or else at least one *.safetensors file. Metadata
 * files are fetched before weights, so complete weights mean an earlier download finished.
 */
export async function missingFromSnapshot(folder: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(folder);
  } catch {
    return ['(the whole snapshot folder)'];
  }
  const indexes = WEIGHT_INDEX_FILES.filter((n) => names.includes(n));
  if (indexes.length === 0) {
    const hasWeights = (await Promise.all(names.filter((n) => n.endsWith('.safetensors')).map((n) => pathExists(join(folder, n))))).some(Boolean);
    return hasWeights ? [] : ['model.safetensors (or another *.safetensors file)'];
  }
  const missing: string[] = [];
  for (const index of indexes) {
    let json: unknown;
    try {
      json = JSON.parse(await readFile(join(folder, index), 'utf8'));
    } catch {
      missing.push(index);
      continue;
    }
    for (const shard of shardsOfIndex(json, index)) if (!(await pathExists(join(folder, shard)))) missing.push(shard);
  }
  return missing;
}
