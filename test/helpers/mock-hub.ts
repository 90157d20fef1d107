// A local stand-in for the Hugging Face Hub, serving the routes and headers @huggingface/hub and our blob fetch
// use: GET /api/models/{repo}/revision/{rev}, GET /api/models/{repo}/tree/{rev}[/{path}], GET|HEAD
// /{repo}/resolve/{rev}/{path} (LFS files redirect with 302 to /cdn/..., like the real CDN hop) with ETag,
// X-Repo-Commit, X-Linked-Etag, X-Linked-Size, Content-Range and X-Error-Code as the real Hub sends them.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface MockFile {
  readonly bytes: Buffer;
  readonly lfs: boolean;
}

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly range?: string;
  readonly authorization?: string;
}

export const MOCK_REPO = 'tiny-org/tiny-model';
export const COMMIT_MAIN = 'a'.repeat(8) + '0123456789abcdef0123456789abcdef';
export const COMMIT_TAG = 'b'.repeat(8) + '0123456789abcdef0123456789abcdef';
export const TAG = 'v1.0';

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');
export const gitOid = (b: Buffer): string => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');

/** A safetensors file with one f32 tensor of `n` values: 8-byte header length, JSON header, data. */
export function tinySafetensors(name: string, n: number, seed: number): Buffer {
  const header = Buffer.from(JSON.stringify({ [name]: { dtype: 'F32', shape: [n], data_offsets: [0, n * 4] } }));
  const data = Buffer.alloc(n * 4);
  for (let i = 0; i < n; i++) data.writeFloatLE(((i * 7 + seed) % 13) / 13, i * 4);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  return Buffer.concat([len, header, data]);
}

/** The generated repo: what a model needs, plus files that must never be fetched (.bin, onnx/, README). */
export function tinyRepoFiles(): Map<string, MockFile> {
  const shard1 = tinySafetensors('model.embed.weight', 2048, 1);
  const shard2 = tinySafetensors('model.head.weight', 1024, 2);
  const json = (v: unknown): Buffer => Buffer.from(JSON.stringify(v, null, 2));
  return new Map<string, MockFile>([
    ['config.json', { bytes: json({ model_type: 'qwen3', hidden_size: 8 }), lfs: false }],
    ['tokenizer.json', { bytes: json({ version: '1.0', model: { type: 'BPE', vocab: { a: 0 } } }), lfs: true }],
    [
      'model.safetensors.index.json',
      {
        bytes: json({
          metadata: {},
          weight_map: { 'model.embed.weight': 'model-00001-of-00002.safetensors', 'model.head.weight': 'model-00002-of-00002.safetensors' },
        }),
        lfs: false,
      },
    ],
    ['model-00001-of-00002.safetensors', { bytes: shard1, lfs: true }],
    ['model-00002-of-00002.safetensors', { bytes: shard2, lfs: true }],
    ['pytorch_model.bin', { bytes: Buffer.alloc(3000, 7), lfs: true }],
    ['onnx/model.onnx', { bytes: Buffer.alloc(2000, 9), lfs: true }],
    ['README.md', { bytes: Buffer.from('# tiny\n'), lfs: false }],
    ['vae/config.json', { bytes: json({ _class_name: 'AutoencoderKL' }), lfs: false }],
    ['vae/diffusion_pytorch_model.safetensors', { bytes: tinySafetensors('decoder.w', 64, 3), lfs: true }],
    ['vae/diffusion_pytorch_model.bin', { bytes: Buffer.alloc(500, 1), lfs: true }],
  ]);
}

/** The etag a file is cached under: its LFS sha256, or its git blob sha1. */
export function etagOf(f: MockFile): string {
  return f.lfs ? sha256(f.bytes) : gitOid(f.bytes);
}

export class MockHub {
  readonly requests: RecordedRequest[] = [];
  /** Commit -> files; refs name commits. Both commits hold the same files, so their blobs are shared. */
  readonly commits = new Map<string, Map<string, MockFile>>();
  readonly refs = new Map<string, string>([
    ['main', COMMIT_MAIN],
    [TAG, COMMIT_TAG],
  ]);
  requiredToken?: string;
  /** Answer Range requests with the whole file and 200, as a server without range support does. */
  ignoreRange = false;
  private readonly failures = new Map<string, number>(); // path -> bytes sent before the connection drops
  private readonly corruptions = new Set<string>();
  private readonly statuses = new Map<string, number>();
  private server?: Server;
  url = '';

  constructor(readonly repo: string = MOCK_REPO) {
    const files = tinyRepoFiles();
    this.commits.set(COMMIT_MAIN, files);
    this.commits.set(COMMIT_TAG, files);
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((ok) => this.server!.listen(0, '127.0.0.1', ok));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((ok) => this.server?.close(() => ok()) ?? ok());
  }

  /** The next transfer of `path` sends `afterBytes` bytes, then drops the connection. */
  failOnce(path: string, afterBytes: number): void {
    this.failures.set(path, afterBytes);
  }

  /** The next request for `path`'s contents is answered with `status` and no body. */
  statusOnce(path: string, status: number): void {
    this.statuses.set(path, status);
  }

  /** The next transfer of `path` sends the right length of wrong bytes. */
  corruptOnce(path: string): void {
    this.corruptions.add(path);
  }

  /** Transfers of file contents (not metadata), by repo path. */
  transfers(): RecordedRequest[] {
    return this.requests.filter((r) => r.method === 'GET' && (r.path.includes('/resolve/') ? !this.isLfsResolve(r.path) : r.path.startsWith('/cdn/')));
  }

  file(path: string, commit = COMMIT_MAIN): MockFile {
    const f = this.commits.get(commit)?.get(path);
    if (!f) throw new Error(`mock repo has no ${path}`);
    return f;
  }

  private isLfsResolve(path: string): boolean {
    const m = /^\/[^/]+\/[^/]+\/resolve\/[^/]+\/(.+)$/.exec(path);
    const file = m ? this.commits.get(COMMIT_MAIN)?.get(decodeURIComponent(m[1])) : undefined;
    return file?.lfs ?? false;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    this.requests.push({ method: req.method ?? 'GET', path: url.pathname, range: req.headers.range, authorization: req.headers.authorization });
    const fail = (status: number, code: string, error: string): void => {
      res.writeHead(status, { 'Content-Type': 'application/json', 'X-Error-Code': code });
      res.end(JSON.stringify({ error }));
    };
    const parts = url.pathname.split('/').slice(1).map(decodeURIComponent);

    if (parts[0] === 'cdn') return this.sendFile(req, res, parts.slice(1).join('/'), url.searchParams.get('commit') ?? COMMIT_MAIN, {});

    const api = parts[0] === 'api' && parts[1] === 'models';
    const [org, name, route, rev, ...rest] = api ? parts.slice(2) : parts;
    if (`${org}/${name}` !== this.repo) return fail(404, 'RepoNotFound', 'Repository not found');
    if (this.requiredToken && req.headers.authorization !== `Bearer ${this.requiredToken}`) {
      return fail(401, 'GatedRepo', `Access to model ${this.repo} is restricted. You must have access to it and be authenticated to access it.`);
    }
    const commit = this.commits.has(rev ?? '') ? rev : this.refs.get(rev ?? '');
    if (!commit) return fail(404, 'RevisionNotFound', `Invalid rev id: ${rev}`);
    const files = this.commits.get(commit)!;
    const path = rest.join('/');

    if (api && route === 'revision') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(
        JSON.stringify({
          _id: 'mock',
          id: this.repo,
          sha: commit,
          private: false,
          gated: false,
          downloads: 0,
          likes: 0,
          lastModified: '2026-01-01T00:00:00.000Z',
          siblings: [...files.keys()].map((rfilename) => ({ rfilename })),
        }),
      );
      return;
    }
    if (api && route === 'tree') {
      const prefix = path ? `${path}/` : '';
      const entries: unknown[] = [];
      const dirs = new Set<string>();
      for (const [p, f] of files) {
        if (!p.startsWith(prefix)) continue;
        const segs = p.split('/');
        for (let i = 1; i < segs.length; i++) dirs.add(segs.slice(0, i).join('/'));
        const pointer = Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${sha256(f.bytes)}\nsize ${f.bytes.length}\n`);
        entries.push({
          type: 'file',
          oid: f.lfs ? gitOid(pointer) : gitOid(f.bytes),
          size: f.bytes.length,
          path: p,
          ...(f.lfs && { lfs: { oid: sha256(f.bytes), size: f.bytes.length, pointerSize: pointer.length } }),
        });
      }
      for (const d of dirs) if (d.startsWith(prefix)) entries.push({ type: 'directory', oid: '0'.repeat(40), size: 0, path: d });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(entries));
      return;
    }
    if (!api && route === 'resolve') {
      const f = files.get(path);
      if (!f) return fail(404, 'EntryNotFound', `Entry not found: ${path}`);
      const headers = { ETag: `"${etagOf(f)}"`, 'X-Repo-Commit': commit, 'X-Linked-Etag': `"${etagOf(f)}"`, 'X-Linked-Size': String(f.bytes.length) };
      if (f.lfs) {
        res.writeHead(302, { ...headers, Location: `/cdn/${path.split('/').map(encodeURIComponent).join('/')}?commit=${commit}` });
        res.end();
        return;
      }
      return this.sendFile(req, res, path, commit, headers);
    }
    fail(404, 'NotFound', `no route ${url.pathname}`);
  }

  private sendFile(req: IncomingMessage, res: ServerResponse, path: string, commit: string, headers: Record<string, string>): void {
    const f = this.commits.get(commit)?.get(path);
    if (!f) {
      res.writeHead(404, { 'X-Error-Code': 'EntryNotFound' });
      res.end();
      return;
    }
    const status = this.statuses.get(path);
    if (status !== undefined) {
      this.statuses.delete(path);
      res.writeHead(status, { 'Content-Type': 'text/plain' });
      res.end('mock failure');
      return;
    }
    let body = f.bytes;
    if (this.corruptions.delete(path)) body = Buffer.from(body.map((b) => b ^ 0xff));
    const range = this.ignoreRange ? null : /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = range ? Number(range[1]) : 0;
    if (start >= body.length && range) {
      res.writeHead(416, { 'Content-Range': `bytes */${body.length}` });
      res.end();
      return;
    }
    const part = body.subarray(start);
    res.writeHead(range ? 206 : 200, {
      ...headers,
      ETag: `"${etagOf(f)}"`,
      'Accept-Ranges': 'bytes',
      'Content-Type': 'application/octet-stream',
      'Content-Length': String(part.length),
      ...(range && { 'Content-Range': `bytes ${start}-${body.length - 1}/${body.length}` }),
    });
    if (req.method === 'HEAD') return void res.end();
    const failAfter = this.failures.get(path);
    if (failAfter !== undefined) {
      this.failures.delete(path);
      res.write(part.subarray(0, failAfter), () => setTimeout(() => res.destroy(), 20));
      return;
    }
    res.end(part);
  }
}

export async function startMockHub(): Promise<MockHub> {
  return new MockHub().start();
}
