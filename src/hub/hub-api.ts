import { HubApiError, listFiles, modelInfo, type ListFileEntry } from '@huggingface/hub';
import { HubError } from './hub-errors.js';

// The Hub's metadata routes go through @huggingface/hub; this file only turns its failures into HubErrors that
// say what to do, and keeps the X-Error-Code header it drops (it tells a missing repo from a missing revision).

export interface HubClient {
  readonly repo: string;
  readonly endpoint: string;
  readonly token?: string;
  readonly fetch: typeof fetch;
}

/** The HubError for a failed HTTP answer: the advice depends on the status, as huggingface_hub's errors do. */
export function httpError(
  client: HubClient,
  status: number,
  url: string,
  detail: { revision?: string; file?: string; errorCode?: string; message?: string } = {},
): HubError {
  const { repo } = client;
  const page = `${client.endpoint}/${repo}`;
  let message: string;
  if (status === 401 || status === 403) {
    // The Hub answers 401 for a missing repo too when no token is sent, so as not to reveal private repos.
    message =
      `${repo} is gated or private (or does not exist): the Hub answered ${status} for ${url}. ` +
      `To get access, accept the license on ${page} while logged in, then set HF_TOKEN or run \`hf auth login\`` +
      (client.token ? ' (a token was sent; it may lack access to this repo).' : ' (no token was sent).');
  } else if (status === 404) {
    const text = `${detail.errorCode ?? ''} ${detail.message ?? ''}`;
    if (detail.file !== undefined && /EntryNotFound/i.test(text)) {
      message = `${repo} has no file '${detail.file}' at revision ${detail.revision ?? 'main'} (404 for ${url})`;
    } else if (detail.revision !== undefined && /Revision|rev id/i.test(text)) {
      message = `revision '${detail.revision}' does not exist in ${repo} (404 for ${url})`;
    } else {
      message = `${repo} is not a local folder, and no repo of that id exists on ${client.endpoint} (404 for ${url}); check the path, or the repo id on ${page}`;
    }
  } else {
    message = `the Hub answered ${status} for ${url}${detail.message ? `: ${detail.message}` : ''}`;
  }
  return new HubError(message, { repo, status });
}

/** Runs a library call, mapping its HubApiError (and a network failure) to a HubError. */
async function call<T>(client: HubClient, revision: string, run: (f: typeof fetch) => Promise<T>): Promise<T> {
  const errorCodes = new Map<string, string>();
  const recording: typeof fetch = async (input, init) => {
    const resp = await client.fetch(input, init);
    const code = resp.headers.get('X-Error-Code');
    if (code) errorCodes.set(resp.url || String(input), code);
    return resp;
  };
  try {
    return await run(recording);
  } catch (e) {
    if (e instanceof HubApiError) {
      const data = e.data as { error?: unknown } | undefined;
      return Promise.reject(
        httpError(client, e.statusCode, e.url, {
          revision,
          errorCode: errorCodes.get(e.url),
          message: typeof data?.error === 'string' ? data.error : undefined,
        }),
      );
    }
    throw networkError(client, e);
  }
}

export function networkError(client: HubClient, e: unknown): HubError {
  if (e instanceof HubError) return e;
  const cause = e instanceof Error ? ((e.cause as Error | undefined)?.message ?? e.message) : String(e);
  return new HubError(
    `cannot reach the Hub at ${client.endpoint} for ${client.repo} (${cause}); ` + `set HF_HUB_OFFLINE=1 to use only what is already in the cache`,
    { repo: client.repo },
  );
}

/** The commit a branch or tag points at now (GET /api/models/{repo}/revision/{rev}). */
export async function resolveCommit(client: HubClient, revision: string): Promise<string> {
  const info = await call(client, revision, (f) =>
    modelInfo({ name: client.repo, revision, hubUrl: client.endpoint, accessToken: client.token, fetch: f, additionalFields: ['sha'] }),
  );
  if (typeof info.sha !== 'string' || !/^[0-9a-f]{40}$/.test(info.sha)) {
    throw new HubError(`the Hub gave no commit for ${client.repo}@${revision} (sha: ${JSON.stringify(info.sha)})`, {
      repo: client.repo,
    });
  }
  return info.sha;
}

/** Every file of the repo (under `subfolder` when given) at a commit, with sizes and LFS oids. */
export async function listRepoFiles(client: HubClient, commit: string, subfolder?: string): Promise<ListFileEntry[]> {
  return call(client, commit, async (f) => {
    const files: ListFileEntry[] = [];
    const iter = listFiles({
      repo: { type: 'model', name: client.repo },
      revision: commit,
      path: subfolder,
      recursive: true,
      hubUrl: client.endpoint,
      accessToken: client.token,
      fetch: f,
    });
    for await (const entry of iter) if (entry.type === 'file') files.push(entry);
    return files;
  });
}
