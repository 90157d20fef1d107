// `tensorgpu web`: serves the browser pages (dist/web: the chat demo, the test harness) on 127.0.0.1. The folder is
// plain static files, so any static host serves it as well; this is the one-command way to open it locally.
import { existsSync } from 'node:fs';
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

export async function runWeb(opts: WebCliOptions): Promise<number> {
  const dir = opts.dir ?? webDir();
  if (!existsSync(join(dir, 'chat.html'))) {
    console.error(`tensorgpu web: no pages in ${dir}; build them with \`npm run build:web\``);
    return 1;
  }
  const server = await serveStatic({ '/': dir }, { host: opts.host, port: opts.port });
  console.log(`tensorgpu web: ${server.url}/chat.html (the chat demo), ${server.url}/harness.html; Ctrl-C stops`);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await server.close();
  return 0;
}
