// `tensorgpu web`: serves the browser pages (dist/web: index.html listing them, the chat demo, the test harness) on 127.0.0.1. The folder is
// plain static files, so any static host serves it as well; this is the one-command way to open it locally.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serveStatic } from '../serve/static-server.js';

export interface WebCliOptions {
  host: string;
  port: number;
  dir?: string;
}

/** dist/web next to the built CLI (dist/cli/web.js), or the repository's dist/web when run from src/. */
export function webDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return [join(here, '..', 'web'), join(here, '..', '..', 'dist', 'web')].find((d) => existsSync(join(d, 'chat.html'))) ?? join(here, '..', 'web');
}

/**
 * Folders the benchmarks page needs besides dist/web, by URL prefix: ONNX Runtime Web's WebAssembly binary, served
 * from the installed package (a dev dependency, ~29 MB, so not copied into dist/web). Empty when it is not installed;
 * the page then says ONNX Runtime Web did not start. A static host serves the same file under peers/ort/.
 */
export function peerAssets(): Record<string, string> {
  try {
    return { '/peers/ort/': dirname(createRequire(import.meta.url).resolve('onnxruntime-web/ort-wasm-simd-threaded.asyncify.wasm')) };
  } catch {
    return {};
  }
}

export async function runWeb(opts: WebCliOptions): Promise<number> {
  const dir = opts.dir ?? webDir();
  if (!existsSync(join(dir, 'chat.html'))) {
    console.error(`tensorgpu web: no pages in ${dir}; build them with \`npm run build:web\``);
    return 1;
  }
  const server = await serveStatic({ '/': dir, ...peerAssets() }, { host: opts.host, port: opts.port });
  console.log(
    `tensorgpu web: ${server.url}/ (the pages: ${server.url}/chat.html the chat demo, transcribe.html, ops.html op parity, bench.html benchmarks against TF.js and ONNX Runtime Web); Ctrl-C stops`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await server.close();
  return 0;
}
