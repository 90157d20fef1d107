// One training step of the built-in model (Qwen3-MoE tiny, real vocabulary): forward over a packed sequence, fused
// crossEntropy, backward, clipGradNorm and the AdamW update of LoRA r=8 adapters on every attention projection,
// on WebGPU against the CPU backend; the same step with a capturable AdamW (step count and lr on the device, what a
// recorded step needs) and with the MoE experts composed per expert (the path before the grouped expert backward).
// And the AdamW update alone: over the adapters' parameter arena (one dispatch), per tensor (the same kernel, one
// dispatch each), and written op by op. Dispatches per step, optimizer dispatches, peak GPU memory and
// optimizer-state bytes per trained parameter are machine-independent. And full fine-tuning (`train step full`):
// the expert stacks trained through the grouped expert weight gradient, against the experts composed per expert;
// LoRA on every expert projection (`train step lora experts`), the adapters stacked, against per expert; and LoRA
// on attention over FP8 / packed 4-bit expert stacks (`train step fp8 experts`, `int4 experts`), x's gradient
// through the transposed stacks.
import { ensureBuiltinModel } from '../src/models/builtin.js';
import { loadModel } from '../src/models/load.js';
import { FineTune, packSequences, type Trainable } from '../src/train/fine-tune.js';
import { defaultLoraTargets, LoraAdapter } from '../src/train/lora.js';
import { trainingLogits, trainingView } from '../src/train/decoder-training.js';
import { SAMPLE_TRAINING_TEXT } from '../src/train/sample-text.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { AdamW, copyInto, crossEntropy, Generator, memoryStats, noGrad, resetPeakMemory, synchronize, tensor, tidy, zeros, type Tensor } from '../src/index.js';
import { timeIt, type BenchCase, type BenchContext, type RowInput } from './harness.js';

const SEQ = 32;

export function trainStepCases(quick: boolean): BenchCase[] {
  const shape = `builtin qwen3-moe-tiny S=${SEQ} lora r8`;
  const full = `builtin qwen3-moe-tiny S=${SEQ} full`;
  const experts = `builtin qwen3-moe-tiny S=${SEQ} lora r8 every projection`;
  const fp8 = `builtin qwen3-moe-tiny S=${SEQ} fp8 at load, lora r8`;
  const int4 = `builtin qwen3-moe-tiny S=${SEQ} int4 at load, lora r8`;
  return [
    { benchmark: 'train step', shape, run: (ctx) => measure(ctx, shape, quick) },
    { benchmark: 'train step full', shape: full, run: (ctx) => measureFull(ctx, full, quick) },
    { benchmark: 'train step lora experts', shape: experts, run: (ctx) => measureExpertLora(ctx, experts, quick) },
    { benchmark: 'train step fp8 experts', shape: fp8, run: (ctx) => measureQuantizedExperts(ctx, fp8, quick, 'fp8') },
    { benchmark: 'train step int4 experts', shape: int4, run: (ctx) => measureQuantizedExperts(ctx, int4, quick, 'int4') },
  ];
}

/**
 * One step of the built-in model on WebGPU with the MoE experts composed per expert (the only path before the
 * grouped one) and grouped, same model, trainable and data: `benchmark` is the grouped row, `benchmark composed`
 * its baseline. `trainable` makes what is trained (and returns its release), `describe` the row's note.
 */
async function groupedVsComposed(
  ctx: BenchContext,
  shape: string,
  quick: boolean,
  benchmark: string,
  lr: number,
  trainable: (model: Awaited<ReturnType<typeof loadModel>>['model']) => { trainable: Trainable; release?: () => void },
  describe: (run: FineTune) => string,
  dtype?: 'fp8' | 'int4',
): Promise<RowInput[]> {
  if (!ctx.gpu) return [];
  const dir = await ensureBuiltinModel({ onNotice: ctx.log });
  const tokenizer = TextTokenizer.fromDirectory(dir);
  const sequences = packSequences(tokenizer.encode(SAMPLE_TRAINING_TEXT), SEQ);
  const time = { warmup: 0, minRuns: 1, maxRuns: quick ? 1 : 3, minMs: 0, maxMs: quick ? 0 : 20000 };
  const { model } = await loadModel(dir, { device: 'webgpu', maxSequence: SEQ, dtype });
  const made = trainable(model);
  const rows: RowInput[] = [];
  try {
    for (const variant of [
      { benchmark: `${benchmark} composed`, forward: { moeComposed: true } },
      { benchmark, forward: {} },
    ]) {
      const run = new FineTune(model, made.trainable, { steps: 100, lr, forward: variant.forward });
      try {
        let at = 0;
        let result = await run.step(sequences[0]);
        const t = await timeIt(async () => {
          result = await run.step(sequences[at++ % sequences.length]);
        }, time);
        const why = `${result.dispatches} dispatches/step, ${result.optimizerDispatches} in the optimizer, ${describe(run)}`;
        ctx.log(`  ${variant.benchmark}: ${why}`);
        rows.push({
          benchmark: variant.benchmark,
          shape,
          backend: 'webgpu',
          timing: { ...t, dispatchesPerRun: result.dispatches },
          baselineBenchmark: variant.benchmark === benchmark ? `${benchmark} composed` : undefined,
          note: why,
        });
      } finally {
        run.dispose();
      }
    }
  } finally {
    made.release?.();
    model.dispose();
  }
  return rows;
}

/**
 * LoRA r=8 on every projection, each routed expert's gate / up / down included: the experts' adapters kept stacked
 * and run by differentiable expertLinears, against the experts composed per expert.
 */
function measureExpertLora(ctx: BenchContext, shape: string, quick: boolean): Promise<RowInput[]> {
  let adapter: LoraAdapter | undefined;
  return groupedVsComposed(
    ctx,
    shape,
    quick,
    'train step lora experts',
    1e-3,
    (model) => {
      const view = trainingView(model);
      const targets = [...new Set(view.sites.map((s) => s.module))];
      adapter = LoraAdapter.create(view.sites, { rank: 8, alpha: 16, targetModules: targets }, { device: 'webgpu', generator: new Generator(0) });
      return { trainable: { kind: 'lora', adapter }, release: () => adapter?.dispose() };
    },
    () => `${adapter!.modules.size} adapted projections (${adapter!.stacks.length} expert stacks)`,
  );
}

/** LoRA r=8 on the attention projections of the built-in model with its weights FP8 or 4-bit at load (frozen expert stacks). */
function measureQuantizedExperts(ctx: BenchContext, shape: string, quick: boolean, dtype: 'fp8' | 'int4'): Promise<RowInput[]> {
  let adapter: LoraAdapter | undefined;
  return groupedVsComposed(
    ctx,
    shape,
    quick,
    `train step ${dtype} experts`,
    1e-3,
    (model) => {
      const view = trainingView(model);
      adapter = LoraAdapter.create(
        view.sites,
        { rank: 8, alpha: 16, targetModules: defaultLoraTargets(view) },
        { device: 'webgpu', generator: new Generator(0) },
      );
      return { trainable: { kind: 'lora', adapter }, release: () => adapter?.dispose() };
    },
    () => `${adapter!.modules.size} adapted projections, experts ${dtype}`,
    dtype,
  );
}

/** Full fine-tuning (every weight trained, the expert stacks included through the grouped expert weight gradient). */
function measureFull(ctx: BenchContext, shape: string, quick: boolean): Promise<RowInput[]> {
  return groupedVsComposed(
    ctx,
    shape,
    quick,
    'train step full',
    1e-5,
    () => ({ trainable: { kind: 'full' } }),
    (run) => `${run.parameterCount} trained values`,
  );
}

/** AdamW written op by op (what the fused kernel replaces): about a dozen dispatches per parameter tensor. */
function adamwByOps(params: readonly Tensor[], m: Tensor[], v: Tensor[], t: number, lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01): void {
  noGrad(() =>
    tidy(() => {
      params.forEach((p, i) => {
        const g = p.grad!;
        copyInto(m[i], m[i].mul(b1).add(g.mul(1 - b1)));
        copyInto(v[i], v[i].mul(b2).add(g.mul(g).mul(1 - b2)));
        const denom = v[i]
          .div(1 - b2 ** t)
          .sqrt()
          .add(eps);
        copyInto(
          p,
          p.mul(1 - lr * wd).sub(
            m[i]
              .div(1 - b1 ** t)
              .div(denom)
              .mul(lr),
          ),
        );
      });
    }),
  );
}

async function measure(ctx: BenchContext, shape: string, quick: boolean): Promise<RowInput[]> {
  const dir = await ensureBuiltinModel({ onNotice: ctx.log });
  const tokenizer = TextTokenizer.fromDirectory(dir);
  const sequences = packSequences(tokenizer.encode(SAMPLE_TRAINING_TEXT), SEQ);
  const rows: RowInput[] = [];
  const time = { warmup: 1, minRuns: quick ? 1 : 3, maxRuns: quick ? 1 : 3, minMs: 0, maxMs: quick ? 0 : 20000 };
  for (const device of ['webgpu', 'cpu'] as const) {
    if (device === 'webgpu' && !ctx.gpu) continue;
    const { model } = await loadModel(dir, { device, maxSequence: SEQ });
    const adapter = LoraAdapter.create(
      trainingView(model).sites,
      { rank: 8, alpha: 16, targetModules: defaultLoraTargets(trainingView(model)) },
      { device, generator: new Generator(0) },
    );
    const run = new FineTune(model, { kind: 'lora', adapter }, { steps: 100, lr: 1e-3 });
    try {
      let step = 0;
      let last = { dispatches: 0, optimizerDispatches: 0, loss: 0 };
      await run.step(sequences[0]);
      await synchronize();
      const base = memoryStats().liveBytes;
      resetPeakMemory();
      const timing = await timeIt(async () => {
        last = await run.step(sequences[step++ % sequences.length]);
      }, time);
      const peak = memoryStats().peakLiveBytes;
      const stateBytes = 8; // AdamW: exp_avg and exp_avg_sq in float32 per trained value
      const note = `${device}: ${last.dispatches} dispatches/step, ${last.optimizerDispatches} in the fused AdamW over the arena of ${run.params.length} tensors (${run.parameterCount} values, ${stateBytes} B of state each), peak GPU ${((peak - base) / 2 ** 20).toFixed(1)} MiB above the model + state`;
      ctx.log(`  train step ${note}`);
      rows.push({
        benchmark: 'train step',
        shape,
        backend: device,
        timing: { ...timing, dispatchesPerRun: device === 'webgpu' ? last.dispatches : 0 },
        note: device === 'webgpu' ? note : undefined,
      });
      if (device === 'webgpu') {
        // The same step with a capturable AdamW, and with the experts composed per expert (one warm-up step each).
        const variants = [
          { benchmark: 'train step capturable adamw', options: { capturable: true } },
          { benchmark: 'train step composed experts', options: { forward: { moeComposed: true } } },
          // compile(): a warm-up step (it makes the optimizer state), a traced one, a recorded one, then replays.
          { benchmark: 'train step compiled', options: { compile: true } },
        ];
        for (const variant of variants) {
          const other = new FineTune(model, { kind: 'lora', adapter }, { steps: 100, lr: 1e-3, ...variant.options });
          try {
            let at = 0;
            let result = await other.step(sequences[0]);
            for (let k = 0; 'compile' in variant.options && k < 2; k++) result = await other.step(sequences[0]);
            const t = await timeIt(async () => {
              result = await other.step(sequences[at++ % sequences.length]);
            }, time);
            const why =
              'compile' in variant.options
                ? `${result.dispatches} dispatches/step (${other.compileStatus})`
                : `${result.dispatches} dispatches/step, ${result.optimizerDispatches} in the optimizer`;
            ctx.log(`  ${variant.benchmark}: ${why}`);
            rows.push({
              benchmark: variant.benchmark,
              shape,
              backend: device,
              timing: { ...t, dispatchesPerRun: result.dispatches },
              baselineBenchmark: 'train step',
              note: why,
            });
          } finally {
            other.dispose();
          }
        }
        // The update alone, on the gradients of one more step: fused vs op by op.
        const [inputs, targets] = [tensor(sequences[0].slice(0, SEQ), { dtype: 'int32', device }), tensor(sequences[0].slice(1), { dtype: 'int32', device })];
        const logits = await trainingLogits(run.view, inputs, adapter.delta);
        const loss = crossEntropy(logits, targets);
        loss.backward();
        for (const x of [inputs, targets, logits, loss]) x.dispose();
        const fused = await timeIt(
          async () => {
            run.optimizer.step();
            await synchronize();
          },
          { warmup: 1, minRuns: 5, maxRuns: 20, minMs: 0, maxMs: 2000 },
        );
        // The same fused kernel, one dispatch per tensor (separate parameters, as before the arena).
        const apart = run.params.map((p) => {
          const c = tidy(() => p.detach().clone()).requiresGrad_();
          c.grad = p.grad!.clone();
          return c;
        });
        const perTensor = new AdamW(apart, { lr: 1e-3 });
        const separate = await timeIt(
          async () => {
            perTensor.step();
            await synchronize();
          },
          { warmup: 1, minRuns: 5, maxRuns: 20, minMs: 0, maxMs: 2000 },
        );
        perTensor.dispose();
        for (const c of apart) c.dispose();
        const m = run.params.map((p) => zeros(p.shape, { device }));
        const v = run.params.map((p) => zeros(p.shape, { device }));
        let t = 1;
        const ops = await timeIt(
          async () => {
            adamwByOps(run.params, m, v, t++);
            await synchronize();
          },
          { warmup: 1, minRuns: 5, maxRuns: 20, minMs: 0, maxMs: 2000 },
        );
        const opShape = `${run.params.length} LoRA tensors, ${run.parameterCount} values`;
        rows.push({
          benchmark: 'adamw update fused',
          shape: opShape,
          backend: 'webgpu',
          timing: fused,
          bytes: run.parameterCount * 4 * 7,
          baselineBenchmark: 'adamw update op by op',
        });
        rows.push({
          benchmark: 'adamw update per tensor',
          shape: opShape,
          backend: 'webgpu',
          timing: separate,
          bytes: run.parameterCount * 4 * 7,
          baselineBenchmark: 'adamw update op by op',
        });
        rows.push({ benchmark: 'adamw update op by op', shape: opShape, backend: 'webgpu', timing: ops, bytes: run.parameterCount * 4 * 7 });
        for (const x of [...m, ...v]) x.dispose();
        run.optimizer.zeroGrad();
      }
    } finally {
      run.dispose();
      adapter.dispose();
      model.dispose();
    }
  }
  return rows;
}
