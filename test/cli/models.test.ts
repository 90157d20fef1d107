// `tensorgpu models` / `models rm` through their run functions, on a hand-built cache named by HF_HUB_CACHE.
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runModelsList, runModelsRm } from '../../src/cli/models.js';
import { makeHubCache } from '../helpers/hub-cache.js';

describe('tensorgpu models', () => {
  let c: Awaited<ReturnType<typeof makeHubCache>>;
  let lines: string[];
  const io = () => ({ write: (l: string) => lines.push(l), log: (l: string) => lines.push(`LOG ${l}`), env: { HF_HUB_CACHE: c.cache } });
  beforeEach(async () => {
    c = await makeHubCache();
    lines = [];
  });
  afterEach(async () => {
    await rm(c.cache, { recursive: true, force: true });
  });

  it('lists repo, revisions, size and whether it runs, in a table', async () => {
    expect(await runModelsList({}, io())).toBe(0);
    expect(lines).toEqual([
      'REPO        REVISIONS              SIZE     RUNS',
      `meta/llama  main@${c.llama.slice(0, 7)}           522 B    no: model_type llama not supported`,
      `tiny/qwen3  main@${c.main.slice(0, 7)}, ${c.old.slice(0, 7)}  3.0 KiB  yes (qwen3)`,
      `2 models, 3.5 KiB in ${c.cache}`,
    ]);
  });

  it('finds the cache through HF_HOME/hub too, and says when it is empty', async () => {
    lines = [];
    await runModelsList({}, { write: (l) => lines.push(l), env: { HF_HOME: join(c.cache, 'elsewhere') } });
    expect(lines).toEqual([`no models in the Hugging Face cache ${join(c.cache, 'elsewhere', 'hub')}`]);
  });

  it('--json gives every field', async () => {
    await runModelsList({ json: true }, io());
    const j = JSON.parse(lines.join('\n')) as {
      cacheDir: string;
      models: { repo: string; runnable: boolean; detail: string; revisions: { refs: string[] }[] }[];
    };
    expect(j.cacheDir).toBe(c.cache);
    expect(j.models.map((m) => [m.repo, m.runnable, m.detail, m.revisions.length])).toEqual([
      ['meta/llama', false, 'model_type llama not supported', 1],
      ['tiny/qwen3', true, 'qwen3', 2],
    ]);
  });

  it('rm --revision says what it freed; rm of a repo removes it; an unknown repo names the cache', async () => {
    expect(await runModelsRm('tiny/qwen3', { revision: 'main' }, io())).toBe(0);
    expect(lines).toEqual([`removed tiny/qwen3 revision main/${c.main.slice(0, 7)}, freed ${QWEN_MAIN_ONLY} B from ${c.cache}`]);
    lines = [];
    await runModelsRm('meta/llama', {}, io());
    expect(lines).toEqual([`removed meta/llama (1 revision), freed 522 B from ${c.cache}`]);
    expect(existsSync(join(c.cache, 'models--meta--llama'))).toBe(false);
    await expect(runModelsRm('meta/llama', {}, io())).rejects.toThrow(`meta/llama is not in the Hugging Face cache ${c.cache}`);
  });
});

// The main snapshot's own blobs: its config.json and tokenizer.json ('{}'); the weights stay for the old commit.
const QWEN_MAIN_ONLY = JSON.stringify({ model_type: 'qwen3', hidden_size: 8 }).length + 2;
