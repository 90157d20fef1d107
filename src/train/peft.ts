// LoRA adapters on disk in PEFT's layout, so PEFT (PeftModel.from_pretrained) and other tools load what `train`
// writes and `generate --adapter` loads what PEFT writes: adapter_model.safetensors with
// `base_model.model.<module path>.lora_A.weight` [r, in] / `.lora_B.weight` [out, r], and adapter_config.json.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DeviceName } from '../runtime/backend.js';
import { CheckpointError } from '../core/errors.js';
import { keep } from '../core/scope.js';
import { SafetensorsFile } from '../formats/safetensors-reader.js';
import { tensorSource, writeSafetensors } from '../formats/safetensors-writer.js';
import type { ProjectionSite } from './decoder-training.js';
import { LoraAdapter, type LoraConfig, type LoraPair } from './lora.js';

export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';
export const ADAPTER_CONFIG = 'adapter_config.json';

const tensorName = (site: string, part: 'A' | 'B') => `base_model.model.${site}.lora_${part}.weight`;

/** Writes the adapter (float32 tensors) and its config; baseModel is recorded as base_model_name_or_path. */
export async function saveAdapter(dir: string, adapter: LoraAdapter, options: { baseModel?: string } = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  const tensors = [...adapter.modules].flatMap(
    ([site, m]) =>
      [
        [tensorName(site, 'A'), tensorSource(m.a)],
        [tensorName(site, 'B'), tensorSource(m.b)],
      ] as const,
  );
  await writeSafetensors(join(dir, ADAPTER_WEIGHTS), tensors, { format: 'pt' });
  const c = adapter.config;
  const config = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: options.baseModel ?? null,
    r: c.rank,
    lora_alpha: c.alpha,
    lora_dropout: 0,
    target_modules: [...c.targetModules],
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: c.rsLora ?? false,
    use_dora: false,
    init_lora_weights: true,
    inference_mode: true,
    modules_to_save: null,
  };
  await writeFile(join(dir, ADAPTER_CONFIG), `${JSON.stringify(config, null, 2)}\n`);
}

/** adapter_config.json's fields this runtime applies, each checked (a typed error naming the field otherwise). */
export async function readAdapterConfig(dir: string): Promise<LoraConfig> {
  const file = join(dir, ADAPTER_CONFIG);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  } catch (e) {
    throw new CheckpointError(`cannot read the adapter config: ${(e as Error).message}`, { file });
  }
  const fail = (field: string, why: string) => new CheckpointError(`field '${field}' ${why}`, { file });
  if (raw.peft_type !== 'LORA') throw fail('peft_type', `is ${JSON.stringify(raw.peft_type)}; only LORA adapters are supported`);
  if (!Number.isInteger(raw.r) || (raw.r as number) < 1) throw fail('r', `must be a positive integer, got ${JSON.stringify(raw.r)}`);
  const alpha = raw.lora_alpha ?? 8;
  if (typeof alpha !== 'number' || !(alpha > 0)) throw fail('lora_alpha', `must be a positive number, got ${JSON.stringify(alpha)}`);
  if (raw.fan_in_fan_out === true) throw fail('fan_in_fan_out', 'is true (Conv1D-style weights); only nn.Linear adapters are supported');
  if (raw.use_dora === true) throw fail('use_dora', 'is true; DoRA adapters are not supported');
  if (raw.bias !== undefined && raw.bias !== 'none') throw fail('bias', `is ${JSON.stringify(raw.bias)}; adapters with trained biases are not supported`);
  const targets = raw.target_modules;
  const targetModules =
    typeof targets === 'string' ? [targets] : Array.isArray(targets) && targets.every((t) => typeof t === 'string') ? (targets as string[]) : undefined;
  if (!targetModules) throw fail('target_modules', `must be a module name or a list of them, got ${JSON.stringify(targets)}`);
  return { rank: raw.r as number, alpha, targetModules, rsLora: raw.use_rslora === true };
}

/**
 * Loads an adapter for a model's projection sites: every tensor must name a site with lora_A [r, in] and
 * lora_B [out, r] of its shape; a tensor for no site, or a site with only one half, is an error naming it.
 */
export async function loadAdapter(dir: string, sites: readonly ProjectionSite[], options: { device?: DeviceName } = {}): Promise<LoraAdapter> {
  const config = await readAdapterConfig(dir);
  const path = join(dir, ADAPTER_WEIGHTS);
  const file = await SafetensorsFile.open(path);
  const bySite = new Map(sites.map((s) => [s.name, s]));
  const loaded: { site: string; part: 'A' | 'B'; name: string }[] = [];
  for (const name of file.names) {
    const m = /^base_model\.model\.(.+)\.lora_(A|B)(?:\.default)?\.weight$/.exec(name);
    if (!m || !bySite.has(m[1])) {
      await file[Symbol.asyncDispose]();
      throw new CheckpointError(`tensor '${name}' is not a LoRA weight of a projection of this model`, { file: path, tensor: name });
    }
    loaded.push({ site: m[1], part: m[2] as 'A' | 'B', name });
  }
  const modules = new Map<string, { a?: LoraPair['a']; b?: LoraPair['b'] }>();
  try {
    for (const { site, part, name } of loaded) {
      const s = bySite.get(site)!;
      const want = part === 'A' ? [config.rank, s.inFeatures] : [s.outFeatures, config.rank];
      const shape = file.entry(name).shape;
      if (shape.join() !== want.join())
        throw new CheckpointError(`tensor '${name}' is [${shape.join(', ')}], r = ${config.rank} and the model imply [${want.join(', ')}]`, {
          file: path,
          tensor: name,
        });
      const t = keep(await file.load(name, { device: options.device, dtype: 'float32' }));
      const pair = modules.get(site) ?? {};
      pair[part === 'A' ? 'a' : 'b'] = t;
      modules.set(site, pair);
    }
    for (const [site, pair] of modules) {
      if (!pair.a || !pair.b)
        throw new CheckpointError(`module '${site}' has lora_${pair.a ? 'A' : 'B'} but not lora_${pair.a ? 'B' : 'A'}`, {
          file: path,
          tensor: tensorName(site, pair.a ? 'B' : 'A'),
        });
    }
  } catch (e) {
    for (const p of modules.values()) {
      p.a?.dispose();
      p.b?.dispose();
    }
    throw e;
  } finally {
    await file[Symbol.asyncDispose]();
  }
  if (modules.size === 0) throw new CheckpointError('the adapter holds no LoRA weights', { file: path });
  // In one parameter arena, in the model's site order, the routed experts' pairs stacked (as LoraAdapter.create).
  const pairs = new Map([...modules].map(([k, p]) => [k, { a: p.a!, b: p.b! }]));
  try {
    return LoraAdapter.fromPairs(config, sites, pairs);
  } finally {
    for (const p of pairs.values()) for (const t of [p.a, p.b]) t.dispose();
  }
}
