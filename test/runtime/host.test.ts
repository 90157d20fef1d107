// The Node host (runtime/host.ts): the browser-safe modules' Node-only paths (files on disk, the adapter probe, Dawn)
// go through it. Without it (a browser, or the browser entry in Node) they fail with NodeOnlyError naming the
// function; the Node entry installs it by itself, with no test setup (vitest.config.ts installs it for the tests).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { NodeOnlyError } from '../../src/core/errors.js';
import { fileSource } from '../../src/formats/byte-source.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import { writeCheckpoint } from '../../src/formats/checkpoint-writer.js';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { writeSafetensors } from '../../src/formats/safetensors-writer.js';
import { installNodeHost } from '../../src/runtime/host.js';
import { diagnose } from '../../src/runtime/webgpu/diagnose.js';
import { loadGpu } from '../../src/runtime/webgpu/runtime.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'tensorgpu-host-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ONE_TENSOR = [['a', { dtype: 'float32', shape: [2], bytes: () => new Uint8Array(new Float32Array([1, 2]).buffer) }]] as const;

/** Runs an ES module snippet in a fresh Node with tsx (no vitest setup) and returns its last stdout line as JSON. */
function runNode(code: string): unknown {
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, FILE: join(scratch, `${Math.random().toString(36).slice(2)}.safetensors`) },
  });
  if (r.status !== 0) throw new Error(`node exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!);
}

describe('without a Node host (a browser)', () => {
  it('fails each Node-only path with NodeOnlyError naming the function', async () => {
    const host = installNodeHost(undefined);
    try {
      const file = join(scratch, 'none.safetensors');
      const nodeOnly = async (call: () => Promise<unknown>) => {
        const e = await call().then(
          () => undefined,
          (x: unknown) => x,
        );
        expect(e).toBeInstanceOf(NodeOnlyError);
        return (e as NodeOnlyError).fn;
      };
      expect(await nodeOnly(() => Checkpoint.open(file))).toBe('Checkpoint.open');
      expect(await nodeOnly(() => SafetensorsFile.open(file))).toBe('fileSource');
      expect(await nodeOnly(() => fileSource(file))).toBe('fileSource');
      expect(await nodeOnly(() => writeSafetensors(file, ONE_TENSOR))).toBe('writeSafetensors');
      expect(await nodeOnly(() => writeCheckpoint(scratch, ONE_TENSOR))).toBe('writeCheckpoint');
      expect(await nodeOnly(() => loadGpu())).toMatch(/Dawn/);
      const message = (await Checkpoint.open(file).catch((e: Error) => e)) as Error;
      expect(message.message).toMatch(/^Checkpoint\.open is Node-only .*import 'tensorgpu'/);
      // diagnose() never rejects: it says why there is no WebGPU here.
      const d = await diagnose({ refresh: true });
      expect(d).toMatchObject({ available: false, code: 'no-webgpu-runtime', runtime: 'node' });
      expect(d.hint).toMatch(/Node entry/);
    } finally {
      installNodeHost(host);
    }
  });
});

describe('the entries in a fresh Node process (no test setup)', () => {
  it('the Node entry installs the host: files are written and read as before', () => {
    const out = runNode(`
      const { Checkpoint, writeSafetensors } = await import('./src/index.ts');
      await writeSafetensors(process.env.FILE, [['a', { dtype: 'float32', shape: [2], bytes: () => new Uint8Array(new Float32Array([1, 2]).buffer) }]]);
      const ck = await Checkpoint.open(process.env.FILE);
      const t = await ck.load('a', { device: 'cpu' });
      console.log(JSON.stringify({ names: ck.names, values: [...(await t.toArray())] }));
      await ck.close();
    `);
    expect(out).toEqual({ names: ['a'], values: [1, 2] });
  }, 60_000);

  it('the browser entry installs none: Checkpoint.open says it is Node-only', () => {
    const out = runNode(`
      const { Checkpoint, NodeOnlyError } = await import('./src/browser.ts');
      const e = await Checkpoint.open(process.env.FILE).catch((e) => e);
      console.log(JSON.stringify({ nodeOnly: e instanceof NodeOnlyError, fn: e.fn }));
    `);
    expect(out).toEqual({ nodeOnly: true, fn: 'Checkpoint.open' });
  }, 60_000);
});
