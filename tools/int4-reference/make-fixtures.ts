// Regenerates test/fixtures/int4/*.safetensors: for each case a layer `layer` in one 4-bit format (random codes,
// zeros and scales exact in float16/bfloat16), the quantization_config in the metadata (key `config`), and
// `expected` [N, K] float32: the float64 port's dequantized weight (exact in float32: a 5-bit integer times a
// scale with 8 mantissa bits). Usage: npx tsx tools/int4-reference/make-fixtures.ts [outDir]
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import '../../src/runtime/node-host.js';
import { INT4_FIXTURE_CASES, int4FixtureTensors } from './cases.js';
import { writeSafetensors } from '../../src/formats/safetensors-writer.js';

const dir = process.argv[2] ?? join(import.meta.dirname, '../../test/fixtures/int4');
mkdirSync(dir, { recursive: true });
for (const c of INT4_FIXTURE_CASES) {
  const { tensors, config } = int4FixtureTensors(c);
  await writeSafetensors(join(dir, `${c.name}.safetensors`), tensors, { config: JSON.stringify(config) });
  console.log(c.name);
}
