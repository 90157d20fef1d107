import { HubError } from './hub-errors.js';

/** A model named by Hub repo id, optionally pinned to a revision and narrowed to a folder inside the repo. */
export interface RepoSpec {
  /** `org/name` */
  readonly repo: string;
  /** A branch, tag or 40-hex commit; absent means the repo's `main`. */
  readonly revision?: string;
  /** A folder inside the repo (diffusers pipelines keep each part in one), without leading or trailing `/`. */
  readonly subfolder?: string;
}

// huggingface_hub's validate_repo_id: word characters, '-', '.', no '--' or '..', at most 96 characters.
const NAME_PART = /^[\w.-]+$/;
const MAX_REPO_ID = 96;

/** Strings that name a local file or folder, never a repo: absolute, relative, home, Windows paths. */
function looksLikeLocalPath(spec: string): boolean {
  return /^(\/|\.{1,2}(\/|$)|~|[A-Za-z]:[\\/])/.test(spec) || spec.includes('\\');
}

/**
 * Parses `org/name`, `org/name@revision`, `org/name/sub/folder` and `org/name@revision/sub/folder`.
 * Returns undefined for what is plainly a local path (or has no `/` at all), so callers can say "not found";
 * throws a HubError for something shaped like a repo id that the Hub would refuse.
 */
export function parseRepoSpec(spec: string): RepoSpec | undefined {
  if (looksLikeLocalPath(spec) || !spec.includes('/')) return undefined;
  const fail = (why: string): never => {
    throw new HubError(`'${spec}' is not a valid Hub repo spec: ${why} (expected org/name[@revision][/subfolder])`, {
      repo: spec,
    });
  };
  const parts = spec.split('/');
  const org = parts[0];
  let nameAndRev = parts[1];
  let rest = parts.slice(2);
  let revision: string | undefined;
  const at = nameAndRev.indexOf('@');
  if (at >= 0) {
    revision = nameAndRev.slice(at + 1);
    nameAndRev = nameAndRev.slice(0, at);
    // Pull-request refs carry slashes of their own: org/name@refs/pr/12/subfolder.
    if (revision === 'refs' && rest[0] === 'pr' && /^\d+$/.test(rest[1] ?? '')) {
      revision = `refs/pr/${rest[1]}`;
      rest = rest.slice(2);
    }
    if (revision === '') fail('empty revision after @');
    if (!/^[\w.\-/]+$/.test(revision)) fail(`revision '${revision}' has characters a git ref cannot have`);
  }
  for (const [what, part] of [
    ['organization', org],
    ['name', nameAndRev],
  ] as const) {
    if (part === '') fail(`empty ${what}`);
    if (!NAME_PART.test(part)) fail(`${what} '${part}' may only hold letters, digits, '-', '_' and '.'`);
    if (part.includes('--') || part.includes('..')) fail(`${what} '${part}' may not contain '--' or '..'`);
    if (/^[-.]|[-.]$/.test(part)) fail(`${what} '${part}' may not start or end with '-' or '.'`);
  }
  const repo = `${org}/${nameAndRev}`;
  if (repo.length > MAX_REPO_ID) fail(`repo id is longer than ${MAX_REPO_ID} characters`);
  if (repo.endsWith('.git')) fail(`repo id may not end with '.git'`);
  while (rest.length > 0 && rest[rest.length - 1] === '') rest = rest.slice(0, -1);
  if (rest.some((p) => p === '' || p === '.' || p === '..')) fail(`subfolder '${rest.join('/')}' has an empty, '.' or '..' part`);
  const subfolder = rest.length > 0 ? rest.join('/') : undefined;
  return { repo, ...(revision !== undefined && { revision }), ...(subfolder !== undefined && { subfolder }) };
}

/** A 40-hex commit id: huggingface_hub and @huggingface/hub treat such a revision as already resolved. */
export function isCommitHash(revision: string): boolean {
  return /^[0-9a-f]{40}$/.test(revision);
}
