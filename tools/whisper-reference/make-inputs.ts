// Inputs for the numpy golden reference of Whisper (tools/whisper-reference/whisper_reference.py): for each case the
// float32 random checkpoint test/models/whisper-reference.test.ts regenerates, and inputs.json (features as float32
// values, decoder ids, greedy steps).
// Usage: npx tsx tools/whisper-reference/make-inputs.ts [outDir]  (default $TMPDIR/whisper-fixture), then
//        python3 tools/whisper-reference/whisper_reference.py
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import '../../src/runtime/node-host.js'; // writing checkpoints needs the Node host (files)
import { writeRandomWhisperCheckpoint } from '../../src/models/whisper/random-checkpoint.js';
import { referenceFeatures, WHISPER_REFERENCE_CASES } from './presets.js';

const root = process.argv[2] ?? join(tmpdir(), 'whisper-fixture');

for (const [name, c] of Object.entries(WHISPER_REFERENCE_CASES)) {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  await writeRandomWhisperCheckpoint(dir, c.config, { dtype: 'float32', seed: 1 });
  const inputs = {
    features: Array.from(referenceFeatures(c.config)),
    feature_shape: [1, c.config.numMelBins, 2 * c.config.maxSourcePositions],
    decoder_input_ids: c.decoderInputIds,
    greedy_steps: c.greedySteps,
  };
  writeFileSync(join(dir, 'inputs.json'), JSON.stringify(inputs));
  console.log(name, dir);
}
