// Inputs for the numpy golden reference of LFM2 / LFM2-MoE (tools/lfm2-reference/lfm2_reference.py): for each case a
// float32 random checkpoint (the one test/models/lfm2-reference.test.ts regenerates) and inputs.json.
// Usage: npx tsx tools/lfm2-reference/make-inputs.ts [outDir]  (default $TMPDIR/lfm2-fixture), then
//        python3 tools/lfm2-reference/lfm2_reference.py
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import '../../src/runtime/node-host.js'; // writing checkpoints needs the Node host (files)
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { LFM2_REFERENCE_CASES } from './presets.js';

const root = process.argv[2] ?? join(tmpdir(), 'lfm2-fixture');

for (const [name, c] of Object.entries(LFM2_REFERENCE_CASES)) {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  await writeRandomLfm2Checkpoint(dir, c.config, { dtype: 'float32', seed: 1 });
  writeFileSync(join(dir, 'inputs.json'), JSON.stringify({ prompt: c.prompt, greedy_steps: c.greedySteps }));
  console.log(name, dir);
}
