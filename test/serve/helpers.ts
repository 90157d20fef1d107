// A served tiny Qwen3-MoE (the real Qwen3 tokenizer, random weights) on the CPU backend, and an official OpenAI
// client pointed at it.
import OpenAI from 'openai';
import { setDefaultDevice } from '../../src/runtime/registry.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { startServer, type RunningServer, type ServeOptions } from '../../src/serve/server.js';
import { writeTinyChatModel } from '../helpers/qwen3.js';

export const MODEL = 'tiny-chat';

export async function loadTinyModel(): Promise<LoadedModel> {
  setDefaultDevice('cpu');
  return loadModel(await writeTinyChatModel(7), { device: 'cpu' });
}

export async function serve(
  model: LoadedModel | Promise<LoadedModel>,
  options: Partial<ServeOptions> = {},
): Promise<{ server: RunningServer; client: OpenAI }> {
  const server = await startServer({ model, servedModelName: MODEL, port: 0, ...options });
  await server.ready;
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: options.apiKey ?? 'unused', maxRetries: 0 });
  return { server, client };
}

/** A metric's value from the Prometheus text (the first sample line whose name and labels start with `series`). */
export async function metric(server: RunningServer, series: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(series + ' ') || l.startsWith(series + '{'));
  if (!line) throw new Error(`no metric ${series} in\n${text}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Polls check until it holds; the limit only guards a hang (the tests' own limit is 60 s). */
export async function until(check: () => Promise<boolean>, timeoutMs = 50_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out waiting for a condition');
    await new Promise((r) => setTimeout(r, 20));
  }
}
