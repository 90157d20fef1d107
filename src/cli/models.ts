// `tensorgpu models [list]` and `tensorgpu models rm org/name [--revision REV]`: the models in the shared Hugging
// Face cache (the one Python's huggingface_hub fills), with sizes and whether tensorgpu runs them.
import { hubCacheDir } from '../hub/cache-dir.js';
import { listCachedModels, removeCachedModel, type CachedModel, type CachedRevision } from '../models/cached-models.js';
import { formatBytes } from './progress.js';

type Env = Readonly<Record<string, string | undefined>>;

export interface ModelsIo {
  write?: (line: string) => void;
  log?: (line: string) => void;
  env?: Env;
}

const out = (io: ModelsIo) => io.write ?? ((l: string) => process.stdout.write(l + '\n'));
const err = (io: ModelsIo) => io.log ?? ((l: string) => process.stderr.write(l + '\n'));

/** `main@1a2b3c4`, `v1.0@…` for each ref, or the bare short commit. */
export function revisionLabel(r: CachedRevision): string {
  const short = r.commit.slice(0, 7);
  return r.refs.length > 0 ? r.refs.map((ref) => `${ref}@${short}`).join(' ') : short;
}

function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) =>
    r
      .map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c])))
      .join('  ')
      .trimEnd(),
  );
}

function jsonModel(m: CachedModel) {
  return {
    repo: m.repo,
    path: m.path,
    size: m.size,
    runnable: m.runnable.ok,
    detail: m.runnable.detail,
    revisions: m.revisions.map((r) => ({ commit: r.commit, refs: r.refs, size: r.size, files: r.files.length })),
  };
}

export async function runModelsList(options: { json?: boolean } = {}, io: ModelsIo = {}): Promise<number> {
  const cacheDir = hubCacheDir(io.env ?? process.env);
  const listing = await listCachedModels(cacheDir);
  for (const w of listing.warnings) err(io)(`warning: ${w}`);
  if (options.json) {
    out(io)(JSON.stringify({ cacheDir, size: listing.size, models: listing.models.map(jsonModel) }, null, 2));
    return 0;
  }
  if (listing.models.length === 0) {
    out(io)(`no models in the Hugging Face cache ${cacheDir}`);
    return 0;
  }
  const rows = [['REPO', 'REVISIONS', 'SIZE', 'RUNS']];
  for (const m of listing.models) {
    rows.push([
      m.repo,
      m.revisions.map(revisionLabel).join(', ') || '-',
      formatBytes(m.size),
      m.runnable.ok ? `yes (${m.runnable.detail})` : `no: ${m.runnable.detail}`,
    ]);
  }
  for (const line of table(rows)) out(io)(line);
  const n = listing.models.length;
  out(io)(`${n} model${n === 1 ? '' : 's'}, ${formatBytes(listing.size)} in ${cacheDir}`);
  return 0;
}

export async function runModelsRm(repo: string, options: { revision?: string } = {}, io: ModelsIo = {}): Promise<number> {
  const cacheDir = hubCacheDir(io.env ?? process.env);
  const r = await removeCachedModel(cacheDir, repo, options);
  const what = r.wholeRepo
    ? `${r.repo} (${r.commits.length} revision${r.commits.length === 1 ? '' : 's'})`
    : `${r.repo} revision ${[...r.refs, r.commits[0].slice(0, 7)].join('/')}`;
  out(io)(`removed ${what}, freed ${formatBytes(r.freedBytes)} from ${cacheDir}`);
  return 0;
}
