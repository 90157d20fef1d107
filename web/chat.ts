// The chat demo page: a Qwen3, LFM2 or Qwen3.5 / Qwen3.6 model (any supported model_type) on WebGPU in the page (a
// built-in random Qwen3-MoE or Qwen3.6-shaped model generated here, a Hugging Face folder by URL read with Range requests and optionally kept in this browser, or a model folder picked on this
// computer), tokens streamed as they are sampled, live tok/s, dispatches per token and GPU memory, and a stop button.
// `tensorgpu web` serves it; dist/web is also a plain static folder.
import * as tg from '../src/browser.js';

// The few DOM pieces this page uses, declared here: the project compiles without lib.dom (whose WebGPU types clash
// with @webgpu/types), so the page is typed loosely at its edges.
/* eslint-disable @typescript-eslint/no-explicit-any */
type Element = any;
type HTMLElement = any;
type HTMLInputElement = any;
type HTMLButtonElement = any;
type HTMLTextAreaElement = any;
type HTMLProgressElement = any;
declare const document: { getElementById(id: string): Element; querySelector(selector: string): Element; createElement(tag: string): Element; body: Element };
declare const location: { search: string };
declare const navigator: { storage?: { persist?: () => Promise<boolean> } };

const $ = <T = HTMLElement>(id: string): T => document.getElementById(id) as T;
const status = (text: string) => ($('status').textContent = text);
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

// The built-in model: the CLI's default, qwen3-moe-tiny (random weights, the real Qwen3 vocabulary and tokenizer),
// generated in the page. ?layers=N changes its depth (the tests use a shallower one).
const params = new URLSearchParams(location.search);
const BUILTIN: tg.Qwen3Config = { ...tg.QWEN3_PRESETS['qwen3-moe-tiny']!, numHiddenLayers: Number(params.get('layers') ?? 4) };
// The built-in Qwen3.6-shaped model, qwen3.6-moe-tiny (Gated DeltaNet and gated attention layers, an MoE with a shared
// expert, the release's 248320-token vocabulary with the stand-in tokenizer built from Qwen3's); ?layers=N as above.
const QWEN36_PRESET = tg.QWEN3_5_PRESETS['qwen3.6-moe-tiny']!;
const QWEN36_LAYERS = Math.min(QWEN36_PRESET.numHiddenLayers, Number(params.get('layers') ?? QWEN36_PRESET.numHiddenLayers));
const BUILTIN_QWEN36: tg.Qwen35Config = { ...QWEN36_PRESET, numHiddenLayers: QWEN36_LAYERS, layerTypes: QWEN36_PRESET.layerTypes.slice(0, QWEN36_LAYERS) };

interface Loaded {
  model: tg.CausalLM;
  tokenizer: tg.TextTokenizer;
  name: string;
  /** Where the weights came from, when that is worth saying (the browser's cache, a download kept there). */
  origin?: string;
}

let loaded: Loaded | undefined;
let running: AbortController | undefined;
const history: tg.ChatMessage[] = [];

async function tokenizerAt(base: string, options: tg.CachedUrlOptions = {}): Promise<tg.TextTokenizer> {
  const get = async (f: string) => {
    const text = await tg.fetchText(`${base}/${f}`, options);
    if (text === undefined) throw new Error(`${base}/${f}: HTTP 404`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const [json, config, template] = await Promise.all([
    get('tokenizer.json'),
    get('tokenizer_config.json'),
    tg.fetchText(`${base}/chat_template.jinja`, options),
  ]);
  // Newer releases (Qwen3.5 / Qwen3.6) ship their chat template as chat_template.jinja; it wins, as in transformers.
  return new tg.TextTokenizer(json, template === undefined ? config : { ...config, chat_template: template });
}

/** The tokenizer among files picked with the model (a folder's top level, or files picked together). */
async function tokenizerIn(files: tg.PickedFile[]): Promise<tg.TextTokenizer> {
  const get = async (name: string) => {
    const f = files.find((x) => (x.webkitRelativePath || x.name).split('/').length <= 2 && x.name === name);
    if (!f) throw new Error(`the picked files have no ${name}`);
    return JSON.parse(await f.text()) as Record<string, unknown>;
  };
  const [json, config] = await Promise.all([get('tokenizer.json'), get('tokenizer_config.json')]);
  const template = files.find((x) => (x.webkitRelativePath || x.name).split('/').length <= 2 && x.name === 'chat_template.jinja');
  return new tg.TextTokenizer(json, template ? { ...config, chat_template: await template.text() } : config);
}

/** What the cache events of one load say about where its weights came from. */
function cacheOrigin(keep: boolean, events: readonly tg.CachedFileEvent[]): string | undefined {
  if (!keep) return undefined;
  // No events with keep asked: no store at all (OPFS and the Cache API need https or localhost).
  if (events.length === 0) return 'weights not kept: this page cannot store files here (it needs https or localhost)';
  if (events.every((e) => e.from === 'cache')) return `weights from this browser's cache (${events[0]!.store}), nothing downloaded`;
  if (events.some((e) => e.from === 'network')) return 'weights read from the network: this browser refused to keep them (storage full?)';
  return `weights downloaded and kept in this browser (${events[0]!.store})`;
}

async function showCacheUsage(): Promise<void> {
  const usage = await tg.weightCacheUsage();
  $('cache-usage').textContent = usage.files > 0 ? `kept in this browser: ${usage.files} files, ${mib(usage.bytes)}` : 'nothing kept in this browser';
}

async function load(): Promise<void> {
  const which = (document.querySelector('input[name=model]:checked') as HTMLInputElement).value;
  const progress = $<HTMLProgressElement>('progress');
  loaded?.model.dispose();
  loaded = undefined;
  $<HTMLButtonElement>('send').disabled = true;
  document.body.dataset.state = 'loading';
  const t0 = performance.now();
  progress.hidden = false;
  const onProgress = (done: number, total: number) => {
    progress.value = total > 0 ? done / total : 0;
  };
  if (which === 'builtin') {
    status('generating random weights…');
    const ck = await tg.randomQwen3Checkpoint(BUILTIN, { seed: 0, dtype: params.get('dtype') === 'float32' ? 'float32' : 'bfloat16' });
    status('uploading weights…');
    const { model } = await tg.loadModel(ck, { device: 'webgpu', maxSequence: 512, onProgress });
    loaded = {
      model,
      tokenizer: await tokenizerAt('./tokenizer'),
      name: `built-in random Qwen3-MoE (${BUILTIN.numHiddenLayers} layers, ${BUILTIN.moe!.numExperts} experts)`,
    };
  } else if (which === 'builtin-qwen3.6') {
    status('generating random weights…');
    const dtype = params.get('dtype') === 'float32' ? 'float32' : 'bfloat16';
    const c = { ...BUILTIN_QWEN36, torchDtype: dtype } as const;
    const ck = await tg.randomCheckpointInMemory(tg.qwen35WeightSpecs(c), tg.qwen35ToHfConfig(c), { seed: 0, dtype });
    status('uploading weights…');
    const { model } = await tg.loadModel(ck, { device: 'webgpu', maxSequence: 512, onProgress });
    const qwen3 = await tg.fetchText('./tokenizer/tokenizer.json');
    if (qwen3 === undefined) throw new Error('./tokenizer/tokenizer.json: HTTP 404');
    const files = tg.qwen3_5TokenizerFilesFrom(qwen3);
    const tokenizer = new tg.TextTokenizer(JSON.parse(files['tokenizer.json']!), JSON.parse(files['tokenizer_config.json']!));
    loaded = { model, tokenizer, name: `built-in random Qwen3.6-shaped MoE (${c.numHiddenLayers} layers, ${c.moe!.numExperts} experts + 1 shared)` };
  } else if (which === 'url') {
    const url = $<HTMLInputElement>('url').value.trim().replace(/\/$/, '');
    const events: tg.CachedFileEvent[] = [];
    const keep = $<HTMLInputElement>('keep').checked;
    // Without persistence a browser may evict the kept weights under storage pressure; asking is best effort.
    if (keep) void navigator.storage?.persist?.().catch(() => false);
    const options: tg.CachedUrlOptions = {
      cache: keep && {
        onFile: (e) => events.push(e),
        onDownload: ({ url: file, done, total }) => {
          status(`downloading ${file.slice(file.lastIndexOf('/') + 1)} into this browser: ${mib(done)} of ${mib(total)}`);
          onProgress(done, total);
        },
      },
    };
    status(`opening ${url}…`);
    const ck = await tg.Checkpoint.fromUrl(url, options);
    const { model } = await tg.loadModel(ck, { device: 'webgpu', maxSequence: 2048, onProgress });
    loaded = { model, tokenizer: await tokenizerAt(url, options), name: url, origin: cacheOrigin(keep, events) };
    if (keep) await showCacheUsage();
  } else {
    const files: tg.PickedFile[] = [...($<HTMLInputElement>('folder').files ?? [])];
    if (files.length === 0) throw new Error('pick a model folder (or its files) first');
    status(`opening ${files.length} picked files…`);
    const ck = await tg.Checkpoint.fromFileList(files);
    const { model } = await tg.loadModel(ck, { device: 'webgpu', maxSequence: 2048, onProgress });
    loaded = { model, tokenizer: await tokenizerIn(files), name: `${ck.dir} (on this computer)` };
  }
  progress.hidden = true;
  history.length = 0;
  $('log').textContent = '';
  const origin = loaded.origin ? ` (${loaded.origin})` : '';
  status(`${loaded.name}: loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s${origin}, ${mib(tg.memoryStats().liveBytes)} on the GPU`);
  $<HTMLButtonElement>('send').disabled = false;
  document.body.dataset.state = 'loaded';
}

function showStats(tokens: number, decodeMs: number, dispatches: number | string): void {
  const m = tg.memoryStats();
  const cells = [
    ['tokens', String(tokens)],
    ['tok/s', decodeMs > 0 ? ((tokens - 1) / (decodeMs / 1000)).toFixed(1) : '-'],
    ['dispatches/token', String(dispatches)],
    ['GPU memory', `${mib(m.liveBytes)} (peak ${mib(m.peakAllocatedBytes)})`],
  ];
  $('stats').replaceChildren(...cells.flatMap(([k, v]) => [Object.assign(document.createElement('span'), { textContent: `${k}: ${v}` })]));
}

async function send(): Promise<void> {
  if (!loaded || running) return;
  const text = $<HTMLTextAreaElement>('prompt').value.trim();
  if (!text) return;
  history.push({ role: 'user', content: text });
  const log = $('log');
  log.append(Object.assign(document.createElement('div'), { className: 'user', textContent: `you: ${text}` }));
  const reply = Object.assign(document.createElement('div'), { className: 'assistant', textContent: 'model: ' });
  log.append(reply);
  running = new AbortController();
  $<HTMLButtonElement>('send').disabled = true;
  $<HTMLButtonElement>('stop').disabled = false;
  status('generating…');
  const { model, tokenizer } = loaded;
  const prompt = tokenizer.hasChatTemplate ? history : text;
  const run = tg.generate(model, tokenizer, prompt, {
    maxNewTokens: Number(params.get('tokens') ?? 48),
    temperature: 0.7,
    topP: 0.9,
    seed: 1,
    signal: running.signal,
  });
  let answer = '';
  let tokens = 0;
  let first = 0;
  const d0 = tg.gpuCounters().dispatches;
  try {
    let step = await run.next();
    while (!step.done) {
      answer += step.value.text;
      reply.textContent = `model: ${answer}`;
      tokens++;
      if (tokens === 1) first = performance.now();
      showStats(tokens, performance.now() - first, tokens > 1 ? ((tg.gpuCounters().dispatches - d0) / tokens).toFixed(0) : '-');
      step = await run.next();
    }
    const s = step.value;
    showStats(s.generatedTokens, s.decodeMs, s.dispatchesPerToken.toFixed(0));
    status(`done (${s.stopReason}): ${s.promptTokens} prompt tokens in ${s.prefillMs.toFixed(0)} ms, ${s.generatedTokens} generated`);
  } catch (e) {
    status(`error: ${(e as Error).message}`);
  } finally {
    history.push({ role: 'assistant', content: answer });
    running = undefined;
    $<HTMLButtonElement>('send').disabled = false;
    $<HTMLButtonElement>('stop').disabled = true;
    document.body.dataset.state = 'done';
  }
}

async function main(): Promise<void> {
  const d = await tg.diagnose();
  if (!d.available) {
    status(`WebGPU unavailable: ${d.reason}${d.hint ? ` (${d.hint})` : ''}`);
    return;
  }
  await tg.initDevice('webgpu');
  status(`adapter ${d.adapter?.vendor}/${d.adapter?.architecture}; pick a model and load it`);
  $('load').addEventListener(
    'click',
    () =>
      void load().catch((e) => {
        $<HTMLProgressElement>('progress').hidden = true;
        status(`error: ${(e as Error).message}`);
        document.body.dataset.state = 'error';
      }),
  );
  // Typing a URL or picking a folder selects that model source.
  const select = (value: string) => ((document.querySelector(`input[name=model][value="${value}"]`) as HTMLInputElement).checked = true);
  $('url').addEventListener('input', () => select('url'));
  $('folder').addEventListener('change', () => select('folder'));
  $('clear-cache').addEventListener('click', () => void tg.clearWeightCache().then(showCacheUsage, (e) => status(`error: ${(e as Error).message}`)));
  void showCacheUsage().catch(() => {});
  $('send').addEventListener('click', () => void send());
  $('stop').addEventListener('click', () => running?.abort());
  const preset = params.get('model');
  if (preset === 'qwen3.6-moe-tiny') select('builtin-qwen3.6');
  try {
    if (params.get('autoload') === '1') await load();
    document.body.dataset.state = 'ready';
  } catch (e) {
    status(`error: ${(e as Error).message}`);
    document.body.dataset.state = 'error';
  }
}

void main();

(globalThis as Record<string, unknown>).tensorgpuRelease = () => {
  loaded?.model.dispose();
  tg.releaseDevice();
};
