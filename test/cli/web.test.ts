// `tensorgpu web`'s static server: files, byte ranges (the browser's checkpoint reads), nothing outside the folder.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWeb } from '../../src/cli/web.js';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';

/** A raw GET, so paths reach the server exactly as written (fetch would normalise them). */
function get(url: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path, headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('tensorgpu web: the static server', () => {
  let dir: string;
  let server: StaticServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-web-'));
    mkdirSync(join(dir, 'site'));
    writeFileSync(join(dir, 'site', 'chat.html'), '<p>0123456789</p>');
    writeFileSync(join(dir, 'site', 'index.html'), '<a href="chat.html">chat</a>');
    writeFileSync(join(dir, 'secret.txt'), 'outside');
    server = await serveStatic({ '/': join(dir, 'site') });
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves files whole and by byte range', async () => {
    const whole = await get(server.url, '/chat.html');
    expect(whole).toMatchObject({ status: 200, body: '<p>0123456789</p>' });
    expect(whole.headers['content-type']).toBe('text/html');
    const part = await get(server.url, '/chat.html', { Range: 'bytes=3-6' });
    expect(part).toMatchObject({ status: 206, body: '0123' });
    expect(part.headers['content-range']).toBe('bytes 3-6/17');
    expect((await get(server.url, '/chat.html', { Range: 'bytes=99-' })).status).toBe(416);
  });

  it("serves a folder's URL as its index.html (web/index.html lists the pages)", async () => {
    expect(await get(server.url, '/')).toMatchObject({ status: 200, body: '<a href="chat.html">chat</a>' });
  });

  it('answers 404 outside the folder and 400 for a malformed path, and keeps serving', async () => {
    expect((await get(server.url, '/../secret.txt')).status).toBe(404);
    expect((await get(server.url, '/..%2fsecret.txt')).status).toBe(404);
    expect((await get(server.url, '/%E0%A4%A')).status).toBe(400);
    expect((await get(server.url, '/missing.js')).status).toBe(404);
    expect((await get(server.url, '/chat.html')).status).toBe(200);
  });

  it('refuses a folder without the pages, saying how to build them', async () => {
    const errors: string[] = [];
    const original = console.error;
    console.error = (line: string) => errors.push(line);
    try {
      expect(await runWeb({ host: '127.0.0.1', port: 0, dir: join(dir, 'nothing') })).toBe(1);
    } finally {
      console.error = original;
    }
    expect(errors.join('\n')).toMatch(/npm run build:web/);
  });
});
