import { existsSync, lstatSync, readFileSync, readlinkSync, readdirSync, realpathSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HubError, resolveModelPath, type DownloadProgress, type HubOptions } from '../../src/hub/index.js';
import { COMMIT_MAIN, COMMIT_TAG, MOCK_REPO, TAG, etagOf, startMockHub, type MockHub } from '../helpers/mock-hub.js';

const NEEDED = ['config.json', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors', 'model.safetensors.index.json', 'tokenizer.json'];
const STORAGE = `models--${MOCK_REPO.replace('/', '--')}`;

let hub: MockHub;
let cache: string;
let opts: HubOptions;

beforeEach(async () => {
  hub = await startMockHub();
  cache = await mkdtemp(join(tmpdir(), 'tensorgpu-hub-'));
  // HF_TOKEN unset and the token file inside the temp dir: the developer's own login must not leak in.
  opts = { env: { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.url, HF_HOME: join(cache, 'home') } };
});

afterEach(async () => {
  await hub.close();
  await rm(cache, { recursive: true, force: true });
});

const storage = (): string => join(cache, STORAGE);
const snapshot = (commit = COMMIT_MAIN): string => join(storage(), 'snapshots', commit);

/** Every request but the revision lookup. */
const beyondRevision = (): string[] => hub.requests.filter((r) => !r.path.includes('/revision/')).map((r) => `${r.method} ${r.path}`);

async function rejection(p: Promise<unknown>): Promise<HubError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(HubError);
  return e as HubError;
}

describe('resolveModelPath: downloads by repo id into the huggingface_hub cache layout', () => {
  it('fetches only the needed files, as relative symlinks into blobs, and writes refs/main', async () => {
    const debug = vi.spyOn(console, 'debug');
    const dir = await resolveModelPath(MOCK_REPO, opts);
    expect(debug).not.toHaveBeenCalled();
    debug.mockRestore();
    expect(dir).toBe(snapshot());
    expect(readdirSync(dir).sort()).toEqual(NEEDED);
    for (const name of NEEDED) {
      const link = join(dir, name);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      expect(readlinkSync(link).startsWith('../../blobs/')).toBe(true);
      expect(readFileSync(link).equals(hub.file(name).bytes)).toBe(true);
      expect(realpathSync(link)).toBe(realpathSync(join(storage(), 'blobs', etagOf(hub.file(name)))));
    }
    expect(readFileSync(join(storage(), 'refs', 'main'), 'utf8')).toBe(COMMIT_MAIN);
    const fetched = hub.requests.map((r) => r.path).join('\n');
    expect(fetched).not.toMatch(/pytorch_model\.bin|onnx|README|vae/);
    expect(readdirSync(join(storage(), 'blobs')).filter((b) => b.endsWith('.incomplete'))).toEqual([]);
  });

  it('a second call asks only for the branch commit; with a commit hash or offline it asks nothing', async () => {
    await resolveModelPath(MOCK_REPO, opts);
    hub.requests.length = 0;
    expect(await resolveModelPath(MOCK_REPO, opts)).toBe(snapshot());
    expect(hub.requests.map((r) => r.path)).toEqual([expect.stringContaining(`/api/models/${MOCK_REPO}/revision/main`)]);
    hub.requests.length = 0;
    expect(await resolveModelPath(`${MOCK_REPO}@${COMMIT_MAIN}`, opts)).toBe(snapshot());
    expect(await resolveModelPath(MOCK_REPO, { ...opts, offline: true })).toBe(snapshot());
    expect(await resolveModelPath(MOCK_REPO, { ...opts, env: { ...opts.env, HF_HUB_OFFLINE: '1' } })).toBe(snapshot());
    expect(hub.requests).toEqual([]);
  });

  it('reports progress per file and overall, ending at the total', async () => {
    const events: DownloadProgress[] = [];
    await resolveModelPath(MOCK_REPO, { ...opts, onProgress: (p) => events.push(p) });
    const last = events[events.length - 1];
    const total = NEEDED.reduce((n, f) => n + hub.file(f).bytes.length, 0);
    expect(last.total).toBe(total);
    expect(last.bytes).toBe(total);
    expect(new Set(events.map((e) => e.file))).toEqual(new Set(NEEDED));
    const shard = events.filter((e) => e.file === 'model-00001-of-00002.safetensors');
    expect(shard[shard.length - 1].fileBytes).toBe(hub.file('model-00001-of-00002.safetensors').bytes.length);
    expect(events.every((e, i) => i === 0 || e.bytes >= events[i - 1].bytes)).toBe(true);
  });

  it('continues an interrupted transfer with a Range request that sends only the rest', async () => {
    const shard = 'model-00001-of-00002.safetensors';
    const size = hub.file(shard).bytes.length;
    hub.failOnce(shard, 3000);
    const dir = await resolveModelPath(MOCK_REPO, opts);
    expect(readFileSync(join(dir, shard)).equals(hub.file(shard).bytes)).toBe(true);
    const cdn = hub.requests.filter((r) => r.path === `/cdn/${shard}`);
    expect(cdn.map((r) => r.range)).toEqual([undefined, 'bytes=3000-']);
    expect(size).toBeGreaterThan(3000);
  });

  it('continues a .incomplete left by an earlier process', async () => {
    const shard = 'model-00002-of-00002.safetensors';
    const bytes = hub.file(shard).bytes;
    await mkdir(join(storage(), 'blobs'), { recursive: true });
    await writeFile(join(storage(), 'blobs', `${etagOf(hub.file(shard))}.incomplete`), bytes.subarray(0, 1000));
    const dir = await resolveModelPath(MOCK_REPO, opts);
    expect(readFileSync(join(dir, shard)).equals(bytes)).toBe(true);
    expect(hub.requests.filter((r) => r.path === `/cdn/${shard}`).map((r) => r.range)).toEqual(['bytes=1000-']);
  });

  it('starts over when the server answers a Range request with 200', async () => {
    const shard = 'model-00002-of-00002.safetensors';
    const bytes = hub.file(shard).bytes;
    await mkdir(join(storage(), 'blobs'), { recursive: true });
    await writeFile(join(storage(), 'blobs', `${etagOf(hub.file(shard))}.incomplete`), bytes.subarray(0, 1000));
    hub.ignoreRange = true;
    const dir = await resolveModelPath(MOCK_REPO, opts);
    expect(readFileSync(join(dir, shard)).equals(bytes)).toBe(true);
    expect(hub.requests.filter((r) => r.path === `/cdn/${shard}`).map((r) => r.range)).toEqual(['bytes=1000-']);
  });

  it('two calls at once fetch each file once: the second waits on the blob lock', async () => {
    const [a, b] = await Promise.all([resolveModelPath(MOCK_REPO, opts), resolveModelPath(MOCK_REPO, opts)]);
    expect(a).toBe(snapshot());
    expect(b).toBe(snapshot());
    for (const name of NEEDED) expect(readFileSync(join(a, name)).equals(hub.file(name).bytes)).toBe(true);
    const contents = hub.requests.filter(
      (r) => r.path.startsWith('/cdn/') || (r.path.includes('/resolve/') && !hub.file(r.path.split('/resolve/')[1].split('/').slice(1).join('/')).lfs),
    );
    expect(contents.map((r) => r.path).sort()).toHaveLength(NEEDED.length);
    expect(readdirSync(join(cache, '.locks', STORAGE))).toEqual([]);
  });

  it('deletes and refetches a blob whose sha256 does not match; fails on a second bad copy', async () => {
    const shard = 'model-00002-of-00002.safetensors';
    hub.corruptOnce(shard);
    const dir = await resolveModelPath(MOCK_REPO, opts);
    expect(readFileSync(join(dir, shard)).equals(hub.file(shard).bytes)).toBe(true);
    expect(hub.requests.filter((r) => r.path === `/cdn/${shard}`)).toHaveLength(2);

    const fresh = await mkdtemp(join(tmpdir(), 'tensorgpu-hub-'));
    try {
      hub.corruptOnce(shard);
      const origFetch = fetch;
      // The second copy is bad too: corrupt again as soon as the first bad one was served.
      const f: typeof fetch = async (input, init) => {
        const resp = await origFetch(input, init);
        if (String(input).includes(shard) || resp.url.includes(`/cdn/${shard}`)) hub.corruptOnce(shard);
        return resp;
      };
      const e = await rejection(resolveModelPath(MOCK_REPO, { ...opts, cacheDir: fresh, fetch: f }));
      expect(e.message).toMatch(new RegExp(`${shard}.*sha256`));
      expect(existsSync(join(fresh, STORAGE, 'snapshots', COMMIT_MAIN, shard))).toBe(false);
      expect(readdirSync(join(fresh, STORAGE, 'blobs')).some((b) => b.startsWith(etagOf(hub.file(shard))))).toBe(false);
    } finally {
      await rm(fresh, { recursive: true, force: true });
    }
  });

  it('offline: serves the cache, and names the missing file when it is not there', async () => {
    const offline = { ...opts, env: { ...opts.env, HF_HUB_OFFLINE: '1' } };
    const none = await rejection(resolveModelPath(MOCK_REPO, offline));
    expect(none.message).toContain('HF_HUB_OFFLINE=1');
    expect(none.message).toContain('refs');
    await resolveModelPath(MOCK_REPO, opts);
    await rm(join(snapshot(), 'model-00002-of-00002.safetensors'));
    hub.requests.length = 0;
    const missing = await rejection(resolveModelPath(MOCK_REPO, offline));
    expect(missing.message).toContain('model-00002-of-00002.safetensors');
    expect(missing.message).toContain('HF_HUB_OFFLINE=1');
    expect(hub.requests).toEqual([]);
  });

  it('online, refills a snapshot that lost a file, reusing the blob without a transfer', async () => {
    await resolveModelPath(MOCK_REPO, opts);
    await rm(join(snapshot(), 'model-00002-of-00002.safetensors'));
    hub.requests.length = 0;
    await resolveModelPath(MOCK_REPO, opts);
    expect(existsSync(join(snapshot(), 'model-00002-of-00002.safetensors'))).toBe(true);
    expect(hub.requests.filter((r) => r.path.startsWith('/cdn/') || r.path.includes('/resolve/'))).toEqual([]);
  });

  it('401: a gated or private repo, with the way to get access', async () => {
    hub.requiredToken = 'hf_secret';
    const e = await rejection(resolveModelPath(MOCK_REPO, opts));
    expect(e.status).toBe(401);
    expect(e.repo).toBe(MOCK_REPO);
    expect(e.message).toMatch(/gated or private/);
    expect(e.message).toContain(`/${MOCK_REPO}`);
    expect(e.message).toContain('HF_TOKEN');
    expect(e.message).toContain('hf auth login');
    const dir = await resolveModelPath(MOCK_REPO, { ...opts, env: { ...opts.env, HF_TOKEN: 'hf_secret' } });
    expect(readdirSync(dir).sort()).toEqual(NEEDED);
    expect(hub.requests.filter((r) => !r.path.startsWith('/cdn/')).every((r) => r.authorization === 'Bearer hf_secret' || r.authorization === undefined)).toBe(
      true,
    );
  });

  it('reads the token file `hf auth login` writes', async () => {
    hub.requiredToken = 'hf_from_file';
    await mkdir(join(cache, 'home'), { recursive: true });
    await writeFile(join(cache, 'home', 'token'), 'hf_from_file\n');
    expect(readdirSync(await resolveModelPath(MOCK_REPO, opts)).sort()).toEqual(NEEDED);
  });

  it('404: names the missing repo, or the missing revision', async () => {
    const repo = await rejection(resolveModelPath('tiny-org/no-such-model', opts));
    expect(repo.status).toBe(404);
    expect(repo.message).toMatch(/tiny-org\/no-such-model is not a local folder, and no repo of that id exists/);
    const rev = await rejection(resolveModelPath(`${MOCK_REPO}@v9`, opts));
    expect(rev.status).toBe(404);
    expect(rev.message).toMatch(/revision 'v9' does not exist/);
  });

  it('other statuses name the status and the URL, and leave no file behind', async () => {
    const shard = 'model-00001-of-00002.safetensors';
    hub.statusOnce(shard, 503);
    const e = await rejection(resolveModelPath(MOCK_REPO, opts));
    expect(e.status).toBe(503);
    expect(e.message).toContain('503');
    expect(e.message).toContain(`${hub.url}/${MOCK_REPO}/resolve/${COMMIT_MAIN}/${shard}`);
    expect(existsSync(join(snapshot(), shard))).toBe(false);
    expect(readdirSync(await resolveModelPath(MOCK_REPO, opts)).sort()).toEqual(NEEDED);
  });

  it('uses a cache built by hand in huggingface_hub layout, with no request', async () => {
    const blobs = join(storage(), 'blobs');
    await mkdir(blobs, { recursive: true });
    await mkdir(snapshot(), { recursive: true });
    await mkdir(join(storage(), 'refs'), { recursive: true });
    await writeFile(join(storage(), 'refs', 'main'), COMMIT_MAIN);
    for (const name of NEEDED) {
      const f = hub.file(name);
      await writeFile(join(blobs, etagOf(f)), f.bytes);
      await symlink(`../../blobs/${etagOf(f)}`, join(snapshot(), name));
    }
    await hub.close(); // any request now fails
    expect(await resolveModelPath(MOCK_REPO, { ...opts, offline: true })).toBe(snapshot());
    expect(await resolveModelPath(`${MOCK_REPO}@${COMMIT_MAIN}`, opts)).toBe(snapshot());
    expect(hub.requests).toEqual([]);
  });

  it('falls back to the cached ref when the Hub cannot be reached', async () => {
    await resolveModelPath(MOCK_REPO, opts);
    await hub.close();
    expect(await resolveModelPath(MOCK_REPO, opts)).toBe(snapshot());
  });

  it('@tag resolves to its commit, writes refs/<tag>, and reuses blobs already cached', async () => {
    await resolveModelPath(MOCK_REPO, opts);
    hub.requests.length = 0;
    const dir = await resolveModelPath(`${MOCK_REPO}@${TAG}`, opts);
    expect(dir).toBe(snapshot(COMMIT_TAG));
    expect(readdirSync(dir).sort()).toEqual(NEEDED);
    expect(readFileSync(join(storage(), 'refs', TAG), 'utf8')).toBe(COMMIT_TAG);
    expect(beyondRevision().filter((r) => r.includes('/cdn/') || r.includes('/resolve/'))).toEqual([]);
  });

  it('org/name/subfolder fetches that folder only; org/name@rev/subfolder too', async () => {
    const dir = await resolveModelPath(`${MOCK_REPO}/vae`, opts);
    expect(dir).toBe(join(snapshot(), 'vae'));
    expect(readdirSync(dir).sort()).toEqual(['config.json', 'diffusion_pytorch_model.safetensors']);
    expect(readdirSync(snapshot())).toEqual(['vae']);
    const tagged = await resolveModelPath(`${MOCK_REPO}@${TAG}/vae`, opts);
    expect(tagged).toBe(join(snapshot(COMMIT_TAG), 'vae'));
  });

  it('a local path wins and is returned as is, with no request', async () => {
    const local = join(cache, MOCK_REPO); // a folder that also parses as a repo id when relative
    await mkdir(local, { recursive: true });
    expect(await resolveModelPath(local, opts)).toBe(local);
    expect(hub.requests).toEqual([]);
    // Neither a path nor a repo id: returned for the caller to open (and name as missing), with no request.
    expect(await resolveModelPath('no-slash-no-path', opts)).toBe('no-slash-no-path');
    expect(hub.requests).toEqual([]);
  });
});
