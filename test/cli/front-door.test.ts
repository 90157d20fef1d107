// The front door (issue 40): what a new user meets first. Flag errors are one line naming the flag (with a "did you
// mean"), found before anything loads; `checkpoint generate` writes a folder `generate` runs; local path typos say the
// folder is missing; `auto` prefers a hardware adapter, then the CPU, then a software one; and the small things
// (--version, Ctrl-C stats, bench's host-work wording, serve's request log and `created`).
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CommanderError, type Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { runGenerate } from '../../src/cli/generate.js';
import { runTrain } from '../../src/cli/train.js';
import { runServe } from '../../src/cli/serve.js';
import { runGenerateCheckpoint } from '../../src/cli/checkpoint.js';
import { hostWorkRatio } from '../../src/cli/bench.js';
import { chooseDevice } from '../../src/cli/device.js';
import { autoDeviceChoice } from '../../src/runtime/device-choice.js';
import { formatReport, type DoctorEnvironment } from '../../src/cli/doctor.js';
import { loadModel } from '../../src/models/load.js';
import { startServer } from '../../src/serve/server.js';
import { initDevice, releaseDevice } from '../../src/runtime/registry.js';
import { diagnose, type AdapterSummary, type Diagnosis } from '../../src/runtime/webgpu/diagnose.js';
import type { LoadedModel } from '../../src/models/load.js';
import { writeTinyChatModel } from '../helpers/qwen3.js';

const root = mkdtempSync(join(tmpdir(), 'tensorgpu-front-door-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Parses argv in process; every action is replaced, so nothing runs: the options the action would get, or the error. */
function parse(argv: string[]): { opts?: Record<string, unknown>; error?: string; out: string } {
  const program = buildProgram();
  let out = '';
  let err = '';
  let opts: Record<string, unknown> | undefined;
  const walk = (c: Command) => {
    c.exitOverride().configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (err += s) });
    if (c.commands.length === 0) c.action((...args: unknown[]) => void (opts = (args.at(-1) as Command).opts()));
    for (const sub of c.commands) walk(sub);
  };
  walk(program);
  try {
    program.parse(argv, { from: 'user' });
  } catch (e) {
    if (!(e instanceof CommanderError)) throw e;
    if (e.code !== 'commander.version') return { error: err, out };
  }
  return { opts, out };
}

describe('flags are checked as they are parsed, in one line naming the flag', () => {
  it.each([
    [['generate', '--top-p', '5'], 'tensorgpu: --top-p 5: expected a number in (0, 1]\n'],
    [['generate', '--temperature', '-1'], 'tensorgpu: --temperature -1: expected a number >= 0\n'],
    [['generate', '--top-k', '2.5'], 'tensorgpu: --top-k 2.5: expected an integer >= 0\n'],
    [['generate', '--seed', '-1'], 'tensorgpu: --seed -1: expected an integer >= 0\n'],
    [['generate', '--max-tokens', '0'], 'tensorgpu: --max-tokens 0: expected a positive integer\n'],
    [['generate', '--device', 'webgu'], 'tensorgpu: --device webgu: expected one of auto, webgpu, cpu (did you mean webgpu?)\n'],
    [['generate', '--devcie', 'cpu'], "tensorgpu: unknown option '--devcie' (did you mean --device?)\n"],
    [['serve', '--port', '99999'], 'tensorgpu: --port 99999: expected a port from 0 (any free port) to 65535\n'],
    [['train', '--lr', '0'], 'tensorgpu: --lr 0: expected a number > 0\n'],
    [['transcribe', 'a.wav', '--task', 'translat'], 'tensorgpu: --task translat: expected one of transcribe, translate (did you mean translate?)\n'],
    [['checkpoint', 'generate', '--out', 'x', '--preset', 'qwen3-tin'], /^tensorgpu: --preset qwen3-tin: expected one of .* \(did you mean qwen3-tiny\?\)\n$/],
    [['genrate'], "tensorgpu: unknown command 'genrate' (did you mean generate?)\n"],
  ])('%j', (argv, expected) => {
    const { error, opts } = parse(argv);
    expect(opts).toBeUndefined();
    if (typeof expected === 'string') expect(error).toBe(expected);
    else expect(error).toMatch(expected);
  });

  it('accepts --seed 0 (generate, train, checkpoint generate) and the bounds of the sampling ranges', () => {
    expect(parse(['generate', '--seed', '0', '--top-p', '1', '--temperature', '0', '--top-k', '0']).opts).toMatchObject({
      seed: 0,
      topP: 1,
      temperature: 0,
      topK: 0,
    });
    expect(parse(['train', '--seed', '0']).opts).toMatchObject({ seed: 0 });
    expect(parse(['checkpoint', 'generate', '--out', 'x', '--seed', '0']).opts).toMatchObject({ seed: 0 });
    expect(parse(['serve', '--port', '0']).opts).toMatchObject({ port: 0 });
  });

  it('--help for generate and serve describes mtp as it is (implemented), with no "not yet" left', () => {
    for (const command of ['generate', 'serve']) {
      const help = parse([command, '--help']).out;
      expect(help).toMatch(/mtp\s+\(the\s+multi-token-prediction\s+layer/);
      expect(help).not.toMatch(/not yet/);
    }
  });

  it('--version prints the package version', () => {
    expect(parse(['--version']).out).toMatch(/^\d+\.\d+\.\d+\n$/);
  });

  it.skipIf(!existsSync('dist/cli/main.js'))('the built command prints the error alone on stderr and exits 1', async () => {
    const run = promisify(execFile);
    const e = (await run(process.execPath, ['dist/cli/main.js', 'generate', '--device', 'webgu']).catch((x: unknown) => x)) as { code: number; stderr: string };
    expect(e.code).toBe(1);
    expect(e.stderr).toBe('tensorgpu: --device webgu: expected one of auto, webgpu, cpu (did you mean webgpu?)\n');
  });
});

describe('what flags name is checked before anything loads', () => {
  it('train --data names the missing file', async () => {
    await expect(
      runTrain({ data: 'missing.txt', out: join(root, 'never'), steps: 1, lr: 1e-3, seqLen: 8, loraRank: 2, seed: 0, device: 'cpu' }, () => {}),
    ).rejects.toThrow(/^--data missing\.txt: no such file$/);
  });

  it('generate --adapter names a missing folder; --speculative draft without --draft-model says so', async () => {
    await expect(
      runGenerate(
        { prompt: 'x', device: 'cpu', adapter: join(root, 'no-adapter') },
        () => {},
        () => {},
      ),
    ).rejects.toThrow(`--adapter ${join(root, 'no-adapter')}: no such folder`);
    await expect(
      runGenerate(
        { prompt: 'x', device: 'cpu', speculative: 'draft' },
        () => {},
        () => {},
      ),
    ).rejects.toThrow('--speculative draft needs --draft-model');
  });

  describe('serve', () => {
    let busy: Server;
    let port = 0;
    beforeAll(async () => {
      busy = createServer();
      await new Promise<void>((resolve) => busy.listen({ host: '127.0.0.1', port: 0 }, resolve));
      port = (busy.address() as { port: number }).port;
    });
    afterAll(() => busy.close());

    it('a port in use is one line naming --port, before the model loads', async () => {
      const logs: string[] = [];
      await expect(
        runServe({ host: '127.0.0.1', port, maxQueue: 1, maxBody: 1024, shutdownTimeout: 1, device: 'cpu', model: 'builtin:qwen3-tiny' }, (l) => logs.push(l)),
      ).rejects.toThrow(`--port ${port}: 127.0.0.1:${port} is already in use`);
      expect(logs).toEqual([]);
    });

    it('a missing model folder is reported before listening', async () => {
      await expect(
        runServe({ host: '127.0.0.1', port: 0, maxQueue: 1, maxBody: 1024, shutdownTimeout: 1, device: 'cpu', model: './no-such-model' }, () => {}),
      ).rejects.toThrow(/\.\/no-such-model: no such folder/);
    });
  });
});

describe('--model', () => {
  let tiny = '';
  beforeAll(async () => {
    tiny = await writeTinyChatModel(3);
  });

  const generateWith = async (model: string, extra: Record<string, unknown> = {}) => {
    let text = '';
    const logs: string[] = [];
    const code = await runGenerate(
      { model, prompt: 'Hi', maxTokens: 2, temperature: 0, device: 'cpu', ...extra },
      (t) => (text += t),
      (l) => logs.push(l),
    );
    return { code, text, logs };
  };

  it('checkpoint generate writes a folder generate runs (tokenizer files included)', async () => {
    const out = join(root, 'ck');
    await runGenerateCheckpoint({ preset: 'lfm2-tiny', out, dtype: 'bfloat16', seed: 0 }, () => {});
    expect(readdirSync(out)).toEqual(expect.arrayContaining(['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']));
    const { code, logs } = await generateWith(out);
    expect(code).toBe(0);
    expect(logs.at(-1)).toMatch(/^\d+ prompt tokens, 2 generated/);
  });

  it('a folder without tokenizer.json is reported before any weight is read', async () => {
    const dir = join(root, 'no-tokenizer');
    mkdirSync(dir);
    writeFileSync(join(dir, 'config.json'), '{"model_type": "qwen3"}');
    writeFileSync(join(dir, 'model.safetensors'), 'not safetensors: reading it would fail differently');
    await expect(generateWith(dir)).rejects.toThrow(`${dir}: no tokenizer.json: generate needs the tokenizer files beside the weights`);
  });

  it('a local path typo says the folder does not exist, also when it looks like a repo id and the Hub is unreachable', async () => {
    await expect(generateWith('./mymodels/qwen3')).rejects.toThrow(/^\.\/mymodels\/qwen3: no such folder .*; \.\/mymodels does not exist either$/);
    await expect(generateWith('qwen3')).rejects.toThrow(/^qwen3: no such folder .*a Hub repo id has the form org\/name$/);
    const saved = { endpoint: process.env.HF_ENDPOINT, cache: process.env.HF_HUB_CACHE };
    process.env.HF_ENDPOINT = 'http://127.0.0.1:9';
    process.env.HF_HUB_CACHE = join(root, 'hub-cache');
    try {
      await expect(generateWith('mymodels/qwen3')).rejects.toThrow(/^mymodels\/qwen3: no such folder here, and as a Hub repo id: cannot reach the Hub/);
    } finally {
      for (const [k, v] of [
        ['HF_ENDPOINT', saved.endpoint],
        ['HF_HUB_CACHE', saved.cache],
      ] as const)
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
    }
  });

  it('a folder that is not a model says what it lacks, in an LLM error (no VAE file names)', async () => {
    const dir = join(root, 'notamodel');
    mkdirSync(dir);
    writeFileSync(join(dir, 'notes.txt'), 'hi');
    const err = (await generateWith(dir).catch((e: unknown) => e)) as Error;
    expect(err.message).toBe(
      `${dir}: not a model folder: no config.json (it holds notes.txt); a model folder holds config.json, model.safetensors (or its shards and index) and tokenizer.json`,
    );
    expect(err.message).not.toMatch(/diffusion_pytorch_model/);
  });

  it('dir/model.safetensors loads the folder (with a notice); a loose file says to pass the folder', async () => {
    const { code, logs } = await generateWith(join(tiny, 'model.safetensors'));
    expect(code).toBe(0);
    expect(logs[0]).toBe(`${join(tiny, 'model.safetensors')} is a file: loading the model folder that holds it, ${tiny}`);
    const loose = join(root, 'loose.safetensors');
    writeFileSync(loose, '');
    await expect(generateWith(loose)).rejects.toThrow(`${loose}: a file, not a model folder: pass the folder that holds it`);
  });

  it("loadModel('builtin:<preset>') works in the API, with its tokenizer", async () => {
    const loaded = await loadModel('builtin:lfm2-tiny', { device: 'cpu' });
    try {
      expect(loaded.tokenizer).toBeDefined();
      expect(loaded.config.modelType).toBe('lfm2');
    } finally {
      loaded.model.dispose();
    }
  });

  it('on the CPU the stats line has no dispatch count; Ctrl-C stops generate and prints the stats so far', async () => {
    const done = await generateWith(tiny);
    expect(done.logs.at(-1)).not.toMatch(/dispatches/);
    const logs: string[] = [];
    let chunks = 0;
    const code = await runGenerate(
      { model: tiny, prompt: 'Hi', maxTokens: 20, temperature: 0, device: 'cpu' },
      () => {
        if (chunks++ === 0) process.emit('SIGINT');
      },
      (l) => logs.push(l),
    );
    expect(code).toBe(130);
    expect(logs.at(-1)).toMatch(/^\d+ prompt tokens, [12] generated \(aborted\); prefill/);
  });
});

describe('--device auto: a hardware adapter, then the CPU, then a software adapter', () => {
  const adapter = (description: string, isFallbackAdapter = false): AdapterSummary => ({
    vendor: 'v',
    architecture: '',
    device: '',
    description,
    features: [],
    limits: {},
    isFallbackAdapter,
  });

  const ok = (a: AdapterSummary): Diagnosis => ({ available: true, backend: 'webgpu', runtime: 'node', code: 'ok', adapter: a, nativeMessages: [] });

  it('chooses by the diagnosis and says why (the library rule, runtime/device-choice.ts)', () => {
    expect(autoDeviceChoice(ok(adapter('NVIDIA H100')))).toEqual({
      device: 'webgpu',
      reason: 'device: webgpu (hardware adapter NVIDIA H100 (v))',
    });
    const sw = autoDeviceChoice(ok(adapter('SwiftShader driver 5.0.0')));
    expect(sw.device).toBe('cpu');
    expect(sw.reason).toMatch(
      /^device: cpu \(the only WebGPU adapter, SwiftShader driver 5\.0\.0 \(v\), is a software renderer, slower than the CPU backend; ask for webgpu \(--device webgpu, initDevice\('webgpu'\)\) to use it anyway\)$/,
    );
    expect(autoDeviceChoice(ok(adapter('some adapter', true))).device).toBe('cpu');
    expect(autoDeviceChoice(ok(adapter('llvmpipe (LLVM 15.0.6, 256 bits)'))).device).toBe('cpu');
    expect(autoDeviceChoice(ok(adapter('Microsoft Basic Render Driver'))).device).toBe('cpu');
    expect(autoDeviceChoice(ok(adapter('SwiftShader driver 5.0.0')), { allowSoftwareAdapter: true })).toEqual({
      device: 'webgpu',
      reason: 'device: webgpu (software adapter SwiftShader driver 5.0.0 (v), taken because allowSoftwareAdapter is set: expect CPU speeds)',
    });
    const none = autoDeviceChoice({
      available: false,
      backend: 'webgpu',
      runtime: 'node',
      code: 'no-gpu-driver',
      reason: 'no GPU adapter',
      nativeMessages: [],
    });
    expect(none).toEqual({ device: 'cpu', reason: 'tensorgpu: WebGPU unavailable (no GPU adapter); using CPU. Run `npx tensorgpu doctor` for details.' });
  });

  it('here: auto takes the CPU over a software adapter, and --device webgpu still takes it', async () => {
    const d = await diagnose();
    const logs: string[] = [];
    try {
      const device = await chooseDevice('auto', (l) => logs.push(l));
      expect(device).toBe(autoDeviceChoice(d).device);
      expect(logs).toEqual([autoDeviceChoice(d).reason]);
      if (d.available) expect(await chooseDevice('webgpu', () => {})).toBe('webgpu');
    } finally {
      releaseDevice();
    }
  });

  it('the library: initDevice(auto) follows the same rule, says it through onNotice, and allowSoftwareAdapter takes a software adapter', async () => {
    const d = await diagnose();
    try {
      const logs: string[] = [];
      expect(await initDevice('auto', { onNotice: (l) => logs.push(l) })).toBe(autoDeviceChoice(d).device);
      expect(logs).toEqual([autoDeviceChoice(d).reason]);
      releaseDevice();
      const allowed: string[] = [];
      const device = await initDevice('auto', { allowSoftwareAdapter: true, onNotice: (l) => allowed.push(l) });
      expect(device).toBe(d.available ? 'webgpu' : 'cpu');
      expect(allowed).toEqual([autoDeviceChoice(d, { allowSoftwareAdapter: true }).reason]);
    } finally {
      releaseDevice();
    }
  });

  it("doctor's headline names the adapter and what auto does with a software one", () => {
    const env: DoctorEnvironment = { node: 'v20', platform: 'linux', arch: 'x64', osRelease: '6', webgpu: { version: '0.6.2', path: '/x' }, variables: {} };
    const lines = formatReport(env, {
      available: true,
      backend: 'webgpu',
      runtime: 'node',
      code: 'ok',
      adapter: adapter('SwiftShader driver 5.0.0', true),
      nativeMessages: [],
    });
    expect(lines).toContain(
      'WebGPU: available (SwiftShader driver 5.0.0 (v)); a software adapter: --device auto uses the CPU backend, --device webgpu this adapter',
    );
  });
});

describe('polish', () => {
  it("bench's host-work ratio is said the right way round", () => {
    expect(hostWorkRatio(100, 250)).toBe('2.5x less host work');
    expect(hostWorkRatio(500, 100)).toBe('5.0x more host work: the replay costs more than eager dispatch here');
  });

  it('serve logs one line per request, and /v1/models has a real created time', async () => {
    const logs: string[] = [];
    const before = Math.floor(Date.now() / 1000);
    const server = await startServer({ model: new Promise<LoadedModel>(() => {}), servedModelName: 'm', port: 0, log: (l) => logs.push(l) });
    try {
      const body = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { created: number }[] };
      expect(body.data[0]!.created).toBeGreaterThanOrEqual(before);
      expect(body.data[0]!.created).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
      await fetch(`${server.url}/health`);
      expect(logs.filter((l) => /^GET /.test(l))).toEqual([
        expect.stringMatching(/^GET \/v1\/models 200 \d+ ms$/),
        expect.stringMatching(/^GET \/health 503 \d+ ms$/),
      ]);
    } finally {
      await server.close(100);
    }
  });
});

describe('serve loads int4 weights like generate', () => {
  it('takes --dtype int4 --group-size 64 and hands both to the model loader; --dtype int3 is refused', () => {
    const { opts, error } = parse(['serve', '--dtype', 'int4', '--group-size', '64']);
    expect(error).toBeUndefined();
    expect(opts).toMatchObject({ dtype: 'int4', groupSize: 64 });
    expect(parse(['serve', '--dtype', 'int3']).error).toMatch(/^tensorgpu: --dtype int3: expected one of fp8, int4, .* \(did you mean int4\?\)\n$/);
  });
});
