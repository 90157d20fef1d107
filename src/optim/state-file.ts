// An optimizer's state dict as a safetensors file: each state tensor as `state.<param index>.<name>` (float32),
// and in the header's metadata the optimizer's name, its hyperparameters and the step counts as JSON (plus a
// scheduler's step, when given), so a run resumed from the file continues exactly where the saved one stopped.
import type { DeviceName } from '../runtime/backend.js';
import { CheckpointError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { SafetensorsFile } from '../formats/safetensors-reader.js';
import { tensorSource, writeSafetensors, type TensorSource } from '../formats/safetensors-writer.js';
import type { HyperValue, OptimizerStateDict, ParamState } from './optimizer.js';

const FORMAT = 'tensorgpu-optimizer-state/1';

/** A scheduler's saved position (LrScheduler.stateDict()). */
export interface SchedulerState {
  readonly lastStep: number;
  readonly baseLr: number;
}

export interface SaveOptimizerStateOptions {
  /** Saved beside the optimizer's state (LrScheduler.stateDict()). */
  scheduler?: SchedulerState;
}

/** Writes sd (optimizer.stateDict()) to a safetensors file at path. */
export async function saveOptimizerState(path: string, sd: OptimizerStateDict, options: SaveOptimizerStateOptions = {}): Promise<void> {
  const tensors: [string, TensorSource][] = [];
  sd.state.forEach((s, i) => {
    for (const [key, t] of Object.entries(s?.tensors ?? {})) tensors.push([`state.${i}.${key}`, tensorSource(t)]);
  });
  const metadata: Record<string, string> = {
    format: FORMAT,
    optimizer: sd.optimizer,
    hyper: JSON.stringify(sd.hyper),
    steps: JSON.stringify(sd.state.map((s) => (s ? s.step : null))),
  };
  if (options.scheduler) metadata.scheduler = JSON.stringify(options.scheduler);
  await writeSafetensors(path, tensors, metadata);
}

export interface LoadedOptimizerState extends OptimizerStateDict {
  readonly scheduler?: SchedulerState;
}

/**
 * Reads a file written by saveOptimizerState, its tensors on `device` (the parameters' device; default the
 * default device). The caller owns the tensors: pass the result to optimizer.loadStateDict (which copies them),
 * then dispose it with disposeOptimizerState.
 */
export async function loadOptimizerState(path: string, options: { device?: DeviceName } = {}): Promise<LoadedOptimizerState> {
  const file = await SafetensorsFile.open(path);
  const loaded: Tensor[] = [];
  try {
    const meta = file.metadata;
    if (meta.format !== FORMAT)
      throw new CheckpointError(`not an optimizer state file (metadata format is ${JSON.stringify(meta.format)}, expected ${FORMAT})`, { file: path });
    const parse = <T>(key: string): T => {
      try {
        return JSON.parse(meta[key]) as T;
      } catch {
        throw new CheckpointError(`metadata '${key}' is not JSON`, { file: path });
      }
    };
    const hyper = parse<Record<string, HyperValue>>('hyper');
    const steps = parse<(number | null)[]>('steps');
    if (!Array.isArray(steps)) throw new CheckpointError(`metadata 'steps' is not a list`, { file: path });
    const byParam = new Map<number, Record<string, Tensor>>();
    for (const name of file.names) {
      const m = /^state\.(\d+)\.(\w+)$/.exec(name);
      const i = m ? Number(m[1]) : -1;
      if (!m || i >= steps.length || steps[i] === null) throw new CheckpointError('a tensor of no parameter with state', { file: path, tensor: name });
      const t = await file.load(name, { device: options.device });
      loaded.push(t);
      const entry = byParam.get(i) ?? {};
      entry[m[2]] = t;
      byParam.set(i, entry);
    }
    const state: (ParamState | null)[] = steps.map((step, i) => (step === null ? null : { step, tensors: byParam.get(i) ?? {} }));
    const scheduler = meta.scheduler === undefined ? undefined : parse<SchedulerState>('scheduler');
    return { optimizer: meta.optimizer, hyper, state, scheduler };
  } catch (e) {
    for (const t of loaded) t.dispose();
    throw e;
  } finally {
    await file.close();
  }
}

/** Disposes the tensors of a state dict read by loadOptimizerState. */
export function disposeOptimizerState(sd: OptimizerStateDict): void {
  for (const s of sd.state) for (const t of Object.values(s?.tensors ?? {})) t.dispose();
}
