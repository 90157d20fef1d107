// Kernel sources are embedded at build time: the committed module matches the .wgsl files (npm test and npm run
// build regenerate it; running vitest alone on a stale one fails here), and nothing under src/ reads a .wgsl
// file at run time.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs build script without type declarations
import { GENERATED_PATH, renderWgslModule } from '../../../scripts/embed-wgsl.mjs';

function files(dir: string, ext: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p, ext) : p.endsWith(ext) ? [p] : [];
  });
}

describe('embedded WGSL', () => {
  it('the generated module is up to date (run `npm run wgsl` after editing a .wgsl file)', () => {
    expect(readFileSync(GENERATED_PATH as string, 'utf8') === (renderWgslModule as () => string)()).toBe(true);
  });

  it('no source file reads WGSL from disk', () => {
    for (const f of files('src', '.ts')) {
      const text = readFileSync(f, 'utf8');
      if (/\.wgsl['"]/.test(text)) expect(text, f).not.toMatch(/readFileSync|node:fs|import\.meta\.url[^\n]*wgsl/);
    }
  });
});
