// What the shared Hugging Face cache holds (huggingface_hub's layout: models--org--name/{blobs,snapshots/<commit>,
// refs/<rev>}, snapshot files being relative symlinks into blobs/), whether tensorgpu can run each model, and
// removing a repo or one revision of it.
//
// Why not @huggingface/hub's scanCacheDir: it skips folders inside a snapshot, so a diffusers pipeline's vae/ (and
// every file under a subfolder) is neither seen nor counted; it skips nested refs (refs/pr/1); one ref to a missing
// snapshot makes it drop the whole repo; and a missing cache dir is an exception. Python's scan_cache_dir walks
// snapshots recursively (glob("**/*")), so this walk does too.
import type { Dirent } from 'node:fs';
import { lstat, readdir, readFile, realpath, rm, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { HubError } from '../hub/hub-errors.js';
import { SUPPORTED_MODEL_TYPES } from './families.js';
import { VAE_CLASSES } from './wan-vae/config.js';

export interface CachedRevision {
  /** The snapshot folder's name: a 40-hex commit. */
  readonly commit: string;
  /** refs/ names pointing at it (main, a tag, pr/1). */
  readonly refs: readonly string[];
  readonly path: string;
  /** Files in the snapshot, relative, with '/' separators. */
  readonly files: readonly string[];
  /** Bytes of the distinct blobs this snapshot links to. */
  readonly size: number;
  readonly lastModified: Date;
}

export interface Runnable {
  readonly ok: boolean;
  /** What runs ("qwen3", "AutoencoderKLWan VAE in vae/"), or why not ("no config.json"). */
  readonly detail: string;
}

export interface CachedModel {
  /** org/name */
  readonly repo: string;
  /** models--org--name */
  readonly path: string;
  readonly revisions: readonly CachedRevision[];
  /** Bytes on disk: every blob once (and files stored in snapshots as copies, where symlinks were not possible). */
  readonly size: number;
  /** Judged on the revision `main` points at, else the newest snapshot. */
  readonly runnable: Runnable;
}

export interface CacheListing {
  readonly cacheDir: string;
  readonly models: readonly CachedModel[];
  readonly size: number;
  /** Entries that could not be read as a cached model, each naming its path. */
  readonly warnings: readonly string[];
}

const isMissing = (e: unknown): boolean => (e as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';

async function entries(dir: string): Promise<Dirent[]> {
  try {
    return await readdir(dir, { withFileTypes: true });
  } catch (e) {
    if (isMissing(e)) return [];
    throw e;
  }
}

/** Paths of the non-directory entries under `dir`, recursively. */
async function walkFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await entries(dir)) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await walkFiles(p)));
    else out.push(p);
  }
  return out;
}

/** refs/ as ref name -> commit (nested refs such as pr/1 keep their slash). */
async function readRefs(refsDir: string): Promise<Map<string, string>> {
  const refs = new Map<string, string>();
  for (const file of await walkFiles(refsDir)) {
    const name = relative(refsDir, file).split(sep).join('/');
    refs.set(name, (await readFile(file, 'utf8')).trim());
  }
  return refs;
}

/** The file a snapshot entry stands for: its blob, or itself when stored as a copy. Undefined for a dangling link. */
async function target(file: string): Promise<{ path: string; size: number; mtimeMs: number } | undefined> {
  try {
    const real = await realpath(file);
    const s = await stat(real);
    return { path: real, size: s.size, mtimeMs: s.mtimeMs };
  } catch (e) {
    if (isMissing(e)) return undefined;
    throw e;
  }
}

async function readJson(file: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as unknown;
  } catch (e) {
    if (isMissing(e)) return undefined;
    return e instanceof SyntaxError ? { __unparsable: e.message } : undefined;
  }
}

const VAE_CLASS_NAMES = Object.keys(VAE_CLASSES);

/** Whether tensorgpu can run the model a snapshot folder holds, and if not, why. */
export async function judgeSnapshot(snapshot: string, files: readonly string[]): Promise<Runnable> {
  const has = (f: string): boolean => files.includes(f);
  const weightsIn = (folder: string): boolean => files.some((f) => f.startsWith(folder) && !f.slice(folder.length).includes('/') && f.endsWith('.safetensors'));
  const vaeIn = async (folder: string): Promise<Runnable | undefined> => {
    const json = await readJson(join(snapshot, folder, 'config.json'));
    const cls = (json as { _class_name?: unknown } | undefined)?._class_name;
    if (typeof cls !== 'string' || !VAE_CLASS_NAMES.includes(cls)) return undefined;
    const where = folder === '' ? '' : ` in ${folder.slice(0, -1)}/`;
    return weightsIn(folder) ? { ok: true, detail: `${cls} VAE${where}` } : { ok: false, detail: `${cls} VAE${where} has no .safetensors weights` };
  };
  const root = has('config.json') ? await readJson(join(snapshot, 'config.json')) : undefined;
  if (root !== undefined) {
    const bad = (root as { __unparsable?: string }).__unparsable;
    if (bad !== undefined) return { ok: false, detail: `config.json is not JSON (${bad})` };
    const type = (root as { model_type?: unknown }).model_type;
    if (typeof type === 'string' && SUPPORTED_MODEL_TYPES.includes(type)) {
      return weightsIn('') ? { ok: true, detail: type } : { ok: false, detail: `${type}, but no .safetensors weights` };
    }
    const vae = await vaeIn('');
    if (vae) return vae;
    if (typeof type === 'string') return { ok: false, detail: `model_type ${type} not supported` };
  }
  if (has('vae/config.json')) {
    const vae = await vaeIn('vae/');
    if (vae) return vae;
  }
  if (root !== undefined) {
    const cls = (root as { _class_name?: unknown })._class_name;
    return { ok: false, detail: typeof cls === 'string' ? `_class_name ${cls} not supported` : 'config.json has no model_type' };
  }
  if (has('model_index.json')) return { ok: false, detail: 'diffusers pipeline without an AutoencoderKLWan / AutoencoderKLQwenImage vae/' };
  return { ok: false, detail: 'no config.json' };
}

interface RepoScan extends CachedModel {
  /** blob path -> size, for every distinct file the repo holds. */
  readonly blobs: ReadonlyMap<string, number>;
  /** commit -> the blob paths its snapshot links to. */
  readonly linked: ReadonlyMap<string, ReadonlySet<string>>;
  readonly refMap: ReadonlyMap<string, string>;
}

function repoIdOf(folder: string): string | undefined {
  if (!folder.startsWith('models--')) return undefined;
  const id = folder.slice('models--'.length).split('--').join('/');
  return id === '' ? undefined : id;
}

export function repoFolderName(repo: string): string {
  return `models--${repo.split('/').join('--')}`;
}

async function scanRepo(repoPath: string, repo: string): Promise<RepoScan> {
  const refMap = await readRefs(join(repoPath, 'refs'));
  const blobs = new Map<string, number>();
  for (const file of await walkFiles(join(repoPath, 'blobs'))) {
    const s = await lstat(file);
    if (s.isFile()) blobs.set(await realpath(file), s.size);
  }
  const linked = new Map<string, Set<string>>();
  const revisions: CachedRevision[] = [];
  for (const e of await entries(join(repoPath, 'snapshots'))) {
    if (!e.isDirectory()) continue;
    const path = join(repoPath, 'snapshots', e.name);
    const files: string[] = [];
    const mine = new Set<string>();
    let size = 0;
    let newest = (await stat(path)).mtimeMs;
    for (const file of await walkFiles(path)) {
      files.push(relative(path, file).split(sep).join('/'));
      const t = await target(file);
      if (!t) continue;
      if (!mine.has(t.path)) size += t.size;
      mine.add(t.path);
      blobs.set(t.path, t.size);
      newest = Math.max(newest, t.mtimeMs);
    }
    linked.set(e.name, mine);
    const refs = [...refMap].filter(([, commit]) => commit === e.name).map(([name]) => name);
    revisions.push({ commit: e.name, refs, path, files: files.sort(), size, lastModified: new Date(newest) });
  }
  // main first, then other refs, then bare commits; newest first within each.
  const rank = (r: CachedRevision): number => (r.refs.includes('main') ? 0 : r.refs.length > 0 ? 1 : 2);
  revisions.sort((a, b) => rank(a) - rank(b) || b.lastModified.getTime() - a.lastModified.getTime());
  const judged = revisions[0];
  const runnable = judged ? await judgeSnapshot(judged.path, judged.files) : { ok: false, detail: 'no snapshot' };
  let total = 0;
  for (const s of blobs.values()) total += s;
  return { repo, path: repoPath, revisions, size: total, runnable, blobs, linked, refMap };
}

/** Lists the models in a Hugging Face cache dir (a missing dir is an empty cache). Datasets and spaces are skipped. */
export async function listCachedModels(cacheDir: string): Promise<CacheListing> {
  const models: CachedModel[] = [];
  const warnings: string[] = [];
  for (const e of await entries(cacheDir)) {
    const repo = repoIdOf(e.name);
    if (!e.isDirectory() || repo === undefined) continue;
    try {
      const { blobs: _b, linked: _l, refMap: _r, ...model } = await scanRepo(join(cacheDir, e.name), repo);
      models.push(model);
    } catch (err) {
      warnings.push(`${join(cacheDir, e.name)}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  models.sort((a, b) => a.repo.localeCompare(b.repo));
  return { cacheDir, models, size: models.reduce((n, m) => n + m.size, 0), warnings };
}

export interface RemovedFromCache {
  readonly repo: string;
  /** Commits whose snapshots went. */
  readonly commits: readonly string[];
  readonly refs: readonly string[];
  /** Bytes of blobs (and copied files) deleted. */
  readonly freedBytes: number;
  /** True when the whole models--org--name folder went. */
  readonly wholeRepo: boolean;
}

/**
 * Removes a cached model: the whole repo folder, or with `revision` (a ref name or a commit, or a unique commit prefix
 * of at least 7 characters) that snapshot, the refs pointing at it, and the blobs no other snapshot links to. When no
 * snapshot is left the repo folder goes too. Asks nothing.
 */
export async function removeCachedModel(cacheDir: string, repo: string, options: { revision?: string } = {}): Promise<RemovedFromCache> {
  const folder = repoFolderName(repo);
  const repoPath = join(cacheDir, folder);
  const exists = await stat(repoPath).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!exists || repoIdOf(folder) !== repo) throw new HubError(`${repo} is not in the Hugging Face cache ${cacheDir} (no ${folder} there)`, { repo });
  const scan = await scanRepo(repoPath, repo);
  const removeAll = async (): Promise<RemovedFromCache> => {
    await rm(repoPath, { recursive: true, force: true });
    await rm(join(cacheDir, '.locks', folder), { recursive: true, force: true });
    return { repo, commits: scan.revisions.map((r) => r.commit), refs: [...scan.refMap.keys()], freedBytes: scan.size, wholeRepo: true };
  };
  if (options.revision === undefined) return removeAll();

  const rev = options.revision;
  const byRef = scan.refMap.get(rev);
  const matches =
    byRef !== undefined ? scan.revisions.filter((r) => r.commit === byRef) : rev.length >= 7 ? scan.revisions.filter((r) => r.commit.startsWith(rev)) : [];
  const available = scan.revisions.map((r) => [...r.refs, r.commit.slice(0, 7)].join('/')).join(', ') || 'none';
  if (matches.length !== 1) {
    const why = matches.length > 1 ? `'${rev}' matches ${matches.length} snapshots` : `no revision '${rev}'`;
    throw new HubError(`${repo} in ${cacheDir}: ${why} (revisions: ${available})`, { repo });
  }
  const gone = matches[0];
  if (scan.revisions.length === 1) return removeAll();

  const stillLinked = new Set<string>();
  for (const [commit, blobs] of scan.linked) if (commit !== gone.commit) for (const b of blobs) stillLinked.add(b);
  let freed = 0;
  const snapshotReal = await realpath(gone.path);
  for (const blob of scan.linked.get(gone.commit) ?? []) {
    if (stillLinked.has(blob)) continue;
    freed += scan.blobs.get(blob) ?? 0;
    // A copy inside the snapshot goes with the folder below; only blobs outside it are removed one by one.
    if (!blob.startsWith(snapshotReal + sep)) await rm(blob, { force: true });
  }
  await rm(gone.path, { recursive: true, force: true });
  const refs = [...scan.refMap].filter(([, commit]) => commit === gone.commit).map(([name]) => name);
  for (const name of refs) await rm(join(repoPath, 'refs', ...name.split('/')), { force: true });
  return { repo, commits: [gone.commit], refs, freedBytes: freed, wholeRepo: false };
}
