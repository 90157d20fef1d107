// Inputs for the numpy golden reference of Qwen3.5 / Qwen3.5-MoE (tools/qwen3_5-reference/qwen3_5_reference.py): for
// each case a float32 random checkpoint in the release layout (the one test/models/qwen3_5-reference.test.ts
// regenerates) and inputs.json.
// Usage: npx tsx tools/qwen3_5-reference/make-inputs.ts [outDir]  (default $TMPDIR/qwen3_5-fixture), then
//        python3 tools/qwen3_5-reference/qwen3_5_reference.py
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import '../../src/runtime/node-host.js'; // writing checkpoints needs the Node host (files)
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { QWEN3_5_REFERENCE_CASES } from './presets.js';

const root = process.argv[2] ?? join(tmpdir(), 'qwen3_5-fixture');

for (const [name, c] of Object.entries(QWEN3_5_REFERENCE_CASES)) {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  await writeRandomQwen35Checkpoint(dir, c.config, { dtype: 'float32', seed: 1 });
  writeFileSync(join(dir, 'inputs.json'), JSON.stringify({ prompt: c.prompt, greedy_steps: c.greedySteps, split: c.split }));
  console.log(name, dir);
}
