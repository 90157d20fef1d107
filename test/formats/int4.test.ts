// The 4-bit checkpoint readers (GPTQ, AWQ GEMM, compressed-tensors pack-quantized) against the float64 port of each
// format's dequantization rule (tools/int4-reference, which regenerates test/fixtures/int4): the dequantized weight
// must equal the port's exactly, on the CPU and on WebGPU. And every unsupported scheme is a typed error naming
// the tensor or field.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CheckpointError, setDefaultDevice } from '../../src/index.js';
import { Checkpoint, type Weight } from '../../src/formats/checkpoint.js';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { dequantizeInt4 } from '../../src/ops/int4.js';
import { INT4_FIXTURE_CASES } from '../../tools/int4-reference/cases.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const FIXTURES = join(import.meta.dirname, '../fixtures/int4');

async function openCase(name: string, edit?: (config: Record<string, unknown>) => void): Promise<Checkpoint> {
  const file = await SafetensorsFile.open(join(FIXTURES, `${name}.safetensors`));
  const config = JSON.parse(file.header.metadata.config) as Record<string, unknown>;
  edit?.(config.quantization_config as Record<string, unknown>);
  return Checkpoint.fromFiles(FIXTURES, config, [file]);
}

function dequant(w: Weight) {
  return dequantizeInt4({ data: w.data, scale: w.scale!, zero: w.int4!.zero, groupSize: w.int4!.groupSize, perm: w.int4!.perm });
}

function disposeWeight(w: Weight) {
  for (const t of [w.data, w.scale, w.int4?.zero, w.int4?.perm]) t?.dispose();
}

describe(`int4 checkpoint readers ${gpu.skipReason}`, () => {
  const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;
  for (const c of INT4_FIXTURE_CASES) {
    it(`${c.name}: the reader's weight equals the port's dequantization exactly (${devices.join(', ')})`, async () => {
      const ck = await openCase(c.name);
      try {
        const expected = await (await ck.load('expected')).toArray();
        for (const device of devices) {
          const w = await ck.loadWeight('layer', { device });
          expect(w.data.shape).toEqual([c.n, c.k / 8]);
          expect(w.int4?.groupSize).toBe(c.groupSize);
          expect(!!w.int4?.perm).toBe(!!c.actOrder);
          const d = dequant(w);
          expect(Array.from(await d.toArray()), `${c.name} on ${device}`).toEqual(Array.from(expected));
          d.dispose();
          disposeWeight(w);
        }
      } finally {
        await ck.close();
      }
    });
  }

  const rejects = async (name: string, edit: (q: Record<string, unknown>) => void, message: RegExp) => {
    const ck = await openCase(name, edit);
    try {
      const err = await ck.loadWeight('layer').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CheckpointError);
      expect((err as Error).message).toMatch(message);
    } finally {
      await ck.close();
    }
  };

  it('rejects 3-bit and 8-bit GPTQ, a group size that does not divide K, an unknown GPTQ format, naming the field', async () => {
    await rejects('gptq-g32-sym-v1', (q) => (q.bits = 3), /quantization_config\.bits must be 4/);
    await rejects('gptq-g32-sym-v1', (q) => (q.bits = 8), /bits must be 4/);
    await rejects('gptq-g32-sym-v1', (q) => (q.group_size = 48), /group_size must be -1 or a multiple of 32/);
    await rejects('gptq-g128-asym-v2-actorder', (q) => (q.group_size = 96), /group_size 96 does not divide K = 256/);
    await rejects('gptq-g32-sym-v1', (q) => (q.checkpoint_format = 'marlin'), /checkpoint_format must be/);
  });

  it('checks GPTQModel dynamic rules: the packing they state, their regexes, bits per module, and modules they exclude', async () => {
    const dyn = (rules: Record<string, unknown>) => (q: Record<string, unknown>) => (q.dynamic = rules);
    await rejects('gptq-g32-sym-v1', dyn({ '+:lay.*': { bits: 8 } }), /tensor 'layer'.*dynamic\['\+:lay\.\*'\]\.bits is 8/);
    await rejects('gptq-g32-sym-v1', dyn({ layer: { checkpoint_format: 'gptq_v2' } }), /dynamic\.layer\.checkpoint_format must be 'gptq'/);
    await rejects('gptq-g32-sym-v1', dyn({ layer: { group_size: 48 } }), /dynamic\.layer\.group_size must be -1 or a multiple of 32/);
    await rejects('gptq-g32-sym-v1', dyn({ '-:(': {} }), /dynamic\.-:\( must be a regular expression/);
    await rejects('gptq-g32-sym-v1', dyn({ '-:^lay': {} }), /tensor 'layer'.*dynamic rule '-:\^lay' leaves this module unquantized/);
    await rejects('gptq-g32-sym-v1', (q) => (q.pack_dtype = 'int16'), /pack_dtype must be 'int32'/);
    await rejects('gptq-g32-sym-v1', (q) => (q.modules_to_not_convert = ['layer']), /modules_to_not_convert entry 'layer' leaves this module unquantized/);
    await rejects('ct-g32-sym-oddn', (q) => (q.ignore = ['lm_head', 're:(']), /ignore must be a list of module names and 're:' regular expressions/);
    await rejects('ct-g32-sym-oddn', (q) => (q.ignore = ['re:la.er']), /ignore entry 're:la\.er' leaves this module unquantized/);
    // The first matching rule decides: a group_size override reads the stored g128 weight under a g64 base scheme;
    // a rule that does not match leaves the base one (here the stored g128).
    for (const [base, rules] of [
      [64, { lay: { group_size: 128 }, '-:lay': {} }],
      [128, { 'model\\.layer': { bits: 8, group_size: 32 } }],
    ] as const) {
      const ck = await openCase('gptq-g128-asym-v2-actorder', (q) => {
        q.group_size = base;
        q.dynamic = rules;
      });
      try {
        const w = await ck.loadWeight('layer');
        expect(w.int4?.groupSize).toBe(128);
        disposeWeight(w);
      } finally {
        await ck.close();
      }
    }
  });

  it('rejects mixed compressed-tensors groups, 8-bit, quantized activations, and an asymmetric weight without zero points', async () => {
    await rejects(
      'ct-g32-sym-oddn',
      (q) => {
        const groups = q.config_groups as Record<string, { weights: Record<string, unknown> }>;
        groups.group_1 = { ...groups.group_0, weights: { ...groups.group_0.weights, group_size: 64 } };
      },
      /config_groups must be groups of one scheme/,
    );
    await rejects(
      'ct-g32-sym-oddn',
      (q) => ((q.config_groups as Record<string, { weights: Record<string, unknown> }>).group_0.weights.num_bits = 8),
      /weights\.num_bits must be 4/,
    );
    await rejects(
      'ct-g32-sym-oddn',
      (q) => ((q.config_groups as Record<string, Record<string, unknown>>).group_0.input_activations = { num_bits: 8 }),
      /input_activations must be null/,
    );
    await rejects(
      'ct-g32-sym-oddn',
      (q) => ((q.config_groups as Record<string, { weights: Record<string, unknown> }>).group_0.weights.symmetric = false),
      /no zero points \('layer\.weight_zero_point'\)/,
    );
    await rejects('awq-g32', (q) => (q.version = 'gemv'), /version must be 'gemm'/);
  });
});
