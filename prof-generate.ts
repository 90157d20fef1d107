import { setDefaultDevice, initDevice, synchronize, startProfiling, stopProfiling } from './src/index.js';
import { generate } from './src/generate/generate.js';
import { loadQwen3 } from './src/models/qwen3/load.js';
import { writeTinyChatModel } from './test/helpers/qwen3.js';
await initDevice('webgpu');
setDefaultDevice('cpu');
let t = performance.now();
const lap = (what: string) => { const n = performance.now(); console.log(what, (n - t).toFixed(0), 'ms'); t = n; };
const dir = await writeTinyChatModel(11); lap('write');
const cpu = await loadQwen3(dir, { device: 'cpu', maxSequence: 64 }); lap('load cpu');
const gpu = await loadQwen3(dir, { device: 'webgpu', maxSequence: 64 }); await synchronize(); lap('load gpu');
async function run(m: any, options: any) {
  const ids: number[] = [];
  const stream = generate(m.model, m.tokenizer!, [{ role: 'user', content: 'Name a color.' }], { maxNewTokens: 3, ...options });
  let r = await stream.next();
  while (!r.done) { ids.push(r.value.id); r = await stream.next(); }
  return { ids, stats: r.value };
}
for (const options of [{ temperature: 0 }, { temperature: 0.7, topP: 0.8, topK: 20, seed: 9 }, { temperature: 0 }, { temperature: 0.7, topP: 0.8, topK: 20, seed: 9 }]) {
  const a = await run(cpu, options); lap('cpu run');
  const b = await run(gpu, options); lap('gpu run');
  console.log(a.ids, b.ids, JSON.stringify({ prefillMs: b.stats.prefillMs, decodeMs: b.stats.decodeMs }));
}
process.exit(0);
