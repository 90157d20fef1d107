// A static file server (`tensorgpu web`, the browser tests): folders mounted at URL prefixes, HTTP Range requests
// answered with 206 (as Hugging Face's CDN and any static host do), a request log for checking what was read.
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, resolve, sep } from 'node:path';

// WebAssembly must be served as application/wasm for WebAssembly.instantiateStreaming (ONNX Runtime Web's binary).
const TYPES: Record<string, string> = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.json': 'application/json',
  '.map': 'application/json',
  '.wasm': 'application/wasm',
};

export interface StaticServer {
  readonly url: string;
  /** Every request as `METHOD path [range]`. */
  readonly log: string[];
  close(): Promise<void>;
}

export async function serveStatic(mounts: Record<string, string>, listen: { host?: string; port?: number } = {}): Promise<StaticServer> {
  const log: string[] = [];
  const server: Server = createServer((req, res) => {
    let path: string;
    try {
      path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    } catch {
      res.writeHead(400).end('bad path');
      return;
    }
    if (log.length < 10_000) log.push(`${req.method} ${path}${req.headers.range ? ` ${req.headers.range}` : ''}`);
    // A folder's URL is its index.html, as static hosts serve it (dist/web/index.html lists the pages).
    if (path.endsWith('/')) path += 'index.html';
    const prefix = Object.keys(mounts)
      .filter((p) => path.startsWith(p))
      .sort((a, b) => b.length - a.length)[0];
    const root = prefix === undefined ? undefined : resolve(mounts[prefix]!);
    const file = root === undefined ? undefined : resolve(join(root, normalize(path.slice(prefix!.length))));
    // Never outside the mounted folder, whatever the path says.
    if (!file?.startsWith(root + sep) || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404).end('not found');
      return;
    }
    const size = statSync(file).size;
    const type = TYPES[extname(file)] ?? 'application/octet-stream';
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (!range) {
      res.writeHead(200, { 'content-type': type, 'content-length': size });
      createReadStream(file).pipe(res);
      return;
    }
    const start = Number(range[1]);
    const end = Math.min(size - 1, range[2] ? Number(range[2]) : size - 1);
    if (start >= size) {
      res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
      return;
    }
    res.writeHead(206, { 'content-type': type, 'content-length': end - start + 1, 'content-range': `bytes ${start}-${end}/${size}` });
    createReadStream(file, { start, end }).pipe(res);
  });
  const host = listen.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port ?? 0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`, log, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
