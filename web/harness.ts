// The page side of the browser tests (test/browser/): the library's browser entry, driven from Playwright through
// window.tensorgpuHarness. Each function returns plain JSON so the Node side can compare it with its own results.
import * as tg from '../src/browser.js';

type Op = { name: string; tolerance: number; run: (device: 'cpu' | 'webgpu') => Promise<Float32Array | Int32Array | Uint8Array> };

/** Fresh random inputs (same seed on both backends), the op on each backend, the largest difference. */
async function parity(seed: number): Promise<{ adapter: string; results: { op: string; maxDiff: number; tolerance: number; size: number }[] }> {
  await tg.initDevice('webgpu');
  const inputs = (device: 'cpu' | 'webgpu', shapes: number[][]) => {
    const g = new tg.Generator(seed);
    return shapes.map((s) => tg.randn(s, { generator: g, device }));
  };
  const on = async (device: 'cpu' | 'webgpu', shapes: number[][], f: (...x: tg.Tensor[]) => tg.Tensor) => {
    const xs = inputs(device, shapes);
    const y = f(...xs);
    const out = await y.toArray();
    for (const t of [...xs, y]) t.dispose();
    return out;
  };
  const ops: Op[] = [
    { name: 'add [1001] (odd size)', tolerance: 1e-6, run: (d) => on(d, [[1001], [1001]], (a, b) => a.add(b)) },
    { name: 'mul by a scalar [257]', tolerance: 1e-6, run: (d) => on(d, [[257]], (a) => a.mul(0.5)) },
    { name: 'exp [3, 333]', tolerance: 1e-5, run: (d) => on(d, [[3, 333]], (a) => a.exp()) },
    { name: 'silu [513]', tolerance: 1e-5, run: (d) => on(d, [[513]], (a) => a.silu()) },
    { name: 'sum over rows [37, 129]', tolerance: 1e-4, run: (d) => on(d, [[37, 129]], (a) => a.sum(1)) },
    { name: 'matmul [33, 65] x [65, 47]', tolerance: 1e-4, run: (d) => on(d, [[33, 65], [65, 47]], (a, b) => tg.matmul(a, b)) },
    { name: 'gemv [1, 300] x [300, 77]', tolerance: 1e-4, run: (d) => on(d, [[1, 300], [300, 77]], (a, b) => tg.matmul(a, b)) },
    { name: 'softmax [5, 4099] (long rows)', tolerance: 1e-6, run: (d) => on(d, [[5, 4099]], (a) => tg.softmax(a, -1)) },
    { name: 'rmsNorm [7, 96]', tolerance: 1e-5, run: (d) => on(d, [[7, 96], [96]], (a, w) => tg.rmsNorm(a, w, 1e-6)) },
    { name: 'sampleToken greedy [1000]', tolerance: 0, run: (d) => on(d, [[1000]], (a) => tg.sampleToken(a, { temperature: 0 })) },
  ];
  const results = [];
  for (const op of ops) {
    const [gpu, cpu] = [await op.run('webgpu'), await op.run('cpu')];
    let maxDiff = gpu.length === cpu.length ? 0 : Infinity;
    for (let i = 0; i < cpu.length; i++) maxDiff = Math.max(maxDiff, Math.abs(gpu[i]! - cpu[i]!) / Math.max(1, Math.abs(cpu[i]!)));
    results.push({ op: op.name, maxDiff, tolerance: op.tolerance, size: cpu.length });
  }
  const diagnosis = await tg.diagnose();
  return { adapter: diagnosis.adapter ? `${diagnosis.adapter.vendor}/${diagnosis.adapter.architecture}` : 'none', results };
}

/** Greedy generation from a random-weight Qwen3 built in the page (no download), token ids from prompt ids. */
async function generateIds(config: tg.Qwen3Config, seed: number, prompt: number[], maxNewTokens: number, tokenizerUrl: string) {
  await tg.initDevice('webgpu');
  const [json, cfg] = await Promise.all(['tokenizer.json', 'tokenizer_config.json'].map(async (f) => (await (await fetch(`${tokenizerUrl}/${f}`)).json()) as Record<string, unknown>));
  const tokenizer = new tg.TextTokenizer(json, cfg);
  const ck = await tg.randomQwen3Checkpoint(config, { seed, dtype: 'float32' });
  const model = await tg.qwen3FromCheckpoint(ck, { device: 'webgpu', maxSequence: 64 });
  try {
    const ids: number[] = [];
    const run = tg.generate(model, tokenizer, prompt, { maxNewTokens, temperature: 0, stopTokenIds: [] });
    let step = await run.next();
    while (!step.done) {
      ids.push(step.value.id);
      step = await run.next();
    }
    return { ids, stats: step.value, memory: tg.memoryStats() };
  } finally {
    model.dispose();
  }
}

/** Opens a safetensors file by URL (Range requests) and reads every tensor; a bad file gives the error it raised. */
async function loadSafetensors(url: string) {
  try {
    const file = await tg.SafetensorsFile.fromUrl(url);
    const tensors: Record<string, number[]> = {};
    for (const name of file.names) {
      const t = await file.load(name, { device: 'webgpu' });
      tensors[name] = [...(await t.toArray())];
      t.dispose();
    }
    return { ok: true as const, tensors };
  } catch (e) {
    return { ok: false as const, name: (e as Error).name, message: (e as Error).message };
  }
}

(globalThis as Record<string, unknown>).tensorgpuHarness = { parity, generateIds, loadSafetensors, release: () => tg.releaseDevice() };
