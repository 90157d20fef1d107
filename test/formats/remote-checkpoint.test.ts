// Checkpoints without a file system: a folder over HTTP (Range requests, as a browser reads it), bytes in memory,
// and the same random checkpoint generated in memory and on disk. Node's fetch against a 127.0.0.1 server.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckpointError } from '../../src/core/errors.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { encodeSafetensors } from '../../src/formats/safetensors-writer.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { randomQwen3Checkpoint, writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';

const CONFIG: Qwen3Config = {
  modelType: 'qwen3_moe',
  vocabSize: 96,
  hiddenSize: 32,
  intermediateSize: 64,
  numHiddenLayers: 2,
  numAttentionHeads: 2,
  numKeyValueHeads: 1,
  headDim: 16,
  rmsNormEps: 1e-6,
  ropeTheta: 10_000,
  maxPositionEmbeddings: 128,
  tieWordEmbeddings: false,
  attentionBias: false,
  bosTokenId: 1,
  eosTokenIds: [2],
  moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 16, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
};

async function values(ck: Checkpoint, name: string): Promise<number[]> {
  const t = await ck.load(name, { device: 'cpu' });
  const out = [...(await t.toArray())];
  t.dispose();
  return out;
}

describe('checkpoints over HTTP and in memory', () => {
  let dir: string;
  let server: StaticServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-remote-'));
    // Sharded, so the index and two or more shards are fetched.
    await writeRandomQwen3Checkpoint(join(dir, 'sharded'), CONFIG, { seed: 3, dtype: 'bfloat16', shardBytes: 20_000 });
    await writeRandomQwen3Checkpoint(join(dir, 'single'), CONFIG, { seed: 3, dtype: 'float32' });
    server = await serveStatic({ '/': dir });
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('opens a sharded folder by URL with the same tensors and config as on disk, reading weights by range only', async () => {
    const remote = await Checkpoint.fromUrl(`${server.url}/sharded`, { fetch });
    const local = await Checkpoint.open(join(dir, 'sharded'));
    try {
      expect(remote.config).toEqual(local.config);
      expect(remote.names.sort()).toEqual(local.names.sort());
      expect(remote.totalBytes).toBe(local.totalBytes);
      for (const name of ['model.embed_tokens.weight', 'model.layers.1.mlp.experts.3.down_proj.weight', 'lm_head.weight']) {
        expect(await values(remote, name)).toEqual(await values(local, name));
      }
      expect(server.log.filter((l) => /\/sharded\/model-\d+-of-\d+\.safetensors bytes=\d+-\d+$/.test(l)).length).toBeGreaterThan(2);
      expect(server.log.filter((l) => /\/sharded\/model-.*\.safetensors$/.test(l))).toEqual([]); // never a whole-file GET
    } finally {
      await local.close();
    }
  });

  it('generates the same random checkpoint in memory as on disk', async () => {
    const mem = await randomQwen3Checkpoint(CONFIG, { seed: 3, dtype: 'float32' });
    const disk = await Checkpoint.open(join(dir, 'single'));
    try {
      expect(mem.config).toEqual(disk.config);
      for (const name of disk.names) expect(await values(mem, name), name).toEqual(await values(disk, name));
    } finally {
      await disk.close();
    }
  });

  it('reads a safetensors file from bytes with the same header checks as a file', async () => {
    const bytes = await encodeSafetensors([['x', { dtype: 'float32', shape: [2], bytes: () => new Uint8Array(new Float32Array([1.5, -2]).buffer) }]]);
    const f = await SafetensorsFile.fromBytes(bytes, 'x.safetensors');
    expect(f.entry('x').shape).toEqual([2]);
    await expect(SafetensorsFile.fromBytes(bytes.subarray(0, bytes.length - 4), 'cut.safetensors')).rejects.toThrow(/cut\.safetensors/);
    const huge = new Uint8Array(16);
    new DataView(huge.buffer).setBigUint64(0, 1n << 40n, true);
    await expect(SafetensorsFile.fromBytes(huge, 'huge.safetensors')).rejects.toBeInstanceOf(CheckpointError);
  });

  it('refuses a server that ignores Range requests, and a missing folder, naming the URL', async () => {
    const plain = createServer((_, res) => res.writeHead(200, { 'content-length': 16 }).end(Buffer.alloc(16))).listen(0, '127.0.0.1');
    await new Promise((r) => plain.once('listening', r));
    try {
      const url = `http://127.0.0.1:${(plain.address() as AddressInfo).port}/model.safetensors`;
      await expect(SafetensorsFile.fromUrl(url)).rejects.toThrow(/ignores Range requests/);
    } finally {
      plain.close();
    }
    const missing = Checkpoint.fromUrl(`${server.url}/nowhere`);
    await expect(missing).rejects.toBeInstanceOf(CheckpointError);
    await expect(Checkpoint.fromUrl(`${server.url}/nowhere`)).rejects.toThrow(/nowhere/);
  });
});
