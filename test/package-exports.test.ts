// The package's entries as a consumer resolves them (Node resolving 'tensorgpu' from inside the package): Node gets
// the full library, a bundler's `browser` condition the browser entry with no Node built-ins, and both subpaths are
// explicit. Resolution only: dist/ need not be built for this.
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function resolveAs(specifier: string, conditions: string[] = []): string {
  const r = spawnSync(
    process.execPath,
    [...conditions.flatMap((c) => ['-C', c]), '--input-type=module', '-e', `console.log(import.meta.resolve(${JSON.stringify(specifier)}))`],
    { cwd: root, encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(r.stderr);
  return fileURLToPath(r.stdout.trim());
}

describe('package exports', () => {
  it("resolves 'tensorgpu' to the Node entry in Node and to the browser entry under the browser condition", () => {
    expect(resolveAs('tensorgpu')).toBe(join(root, 'dist/index.js'));
    expect(resolveAs('tensorgpu', ['browser'])).toBe(join(root, 'dist/browser.js'));
  });

  it("has explicit 'tensorgpu/node' and 'tensorgpu/browser' entries", () => {
    expect(resolveAs('tensorgpu/node')).toBe(join(root, 'dist/index.js'));
    expect(resolveAs('tensorgpu/node', ['browser'])).toBe(join(root, 'dist/index.js'));
    expect(resolveAs('tensorgpu/browser')).toBe(join(root, 'dist/browser.js'));
  });

  it('keeps internal modules private', () => {
    expect(() => resolveAs('tensorgpu/dist/cli/main.js')).toThrow(/ERR_PACKAGE_PATH_NOT_EXPORTED|not exported/i);
  });
});
