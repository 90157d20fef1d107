// The `tensorgpu` command line: each subcommand lives in its own module; this file only declares the flags and
// parses them (with their checks, validate.ts). main.ts runs it.
import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import { runGenerateCheckpoint, runInspectCheckpoint, runLoadCheckpoint } from './checkpoint.js';
import { runDemo } from './demo.js';
import { runGenerate, SPECULATIVE_KINDS, type GenerateCliOptions } from './generate.js';
import { runTrain, type TrainCliOptions } from './train.js';
import { runBench } from './bench.js';
import { runDoctor } from './doctor.js';
import { runVaeDecode } from './vae-decode.js';
import { runVaeEncode } from './vae-encode.js';
import { runAudio, type AudioCliOptions, type AudioFeature } from './audio.js';
import { runTranscribe, type TranscribeCliOptions } from './transcribe.js';
import { runModelsList, runModelsRm } from './models.js';
import { runServe, type ServeCliOptions } from './serve.js';
import { KV_DTYPE_NAMES } from './model-source.js';
import { runWeb, type WebCliOptions } from './web.js';
import { BUILTIN_PREFIX } from '../models/builtin.js';
import { DEFAULT_REQUEST_LIMITS, type RequestLimits } from '../serve/schema-checks.js';
import { presetNames } from '../models/families.js';
import { choice, deviceName, nonNegativeInt, numberIn, oneLineError, port, positiveInt } from './validate.js';

/** package.json's version (dist/cli/ and src/cli/ both sit two levels below it). */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

type DeviceFlag = 'auto' | 'webgpu' | 'cpu';
type TilingFlagValues = {
  tile?: number;
  tileStride?: number;
  tileHeight?: number;
  tileWidth?: number;
  tileStrideHeight?: number;
  tileStrideWidth?: number;
  tiling: boolean;
};

/** diffusers' enable_tiling() sizes, in image pixels, for both VAE commands. */
function tilingOptions(command: Command, what: string): Command {
  return command
    .option('--tile <px>', 'tile height and width in image pixels (diffusers tile_sample_min_height / _width; default 256)', positiveInt)
    .option('--tile-stride <px>', 'distance between tiles in image pixels, both ways; the overlap is blended (default 192)', positiveInt)
    .option('--tile-height <px>', 'tile height (overrides --tile)', positiveInt)
    .option('--tile-width <px>', 'tile width (overrides --tile)', positiveInt)
    .option('--tile-stride-height <px>', 'vertical tile stride (overrides --tile-stride)', positiveInt)
    .option('--tile-stride-width <px>', 'horizontal tile stride (overrides --tile-stride)', positiveInt)
    .option('--no-tiling', `${what} the whole frame at once`);
}

/** 512MiB, 2GB, 1.5GiB or a plain byte count. */
/** `name=value` of one request limit (serve/schema-checks.ts), gathered into an object. */
function requestLimit(v: string, previous: Partial<RequestLimits> = {}): Partial<RequestLimits> {
  const m = /^(\w+)=(\d+)$/.exec(v);
  const name = m?.[1] as keyof RequestLimits | undefined;
  if (!m || !name || !(name in DEFAULT_REQUEST_LIMITS) || Number(m[2]) < 1)
    throw new InvalidArgumentError(`expected name=value with a positive integer, the name one of ${Object.keys(DEFAULT_REQUEST_LIMITS).join(', ')}`);
  return { ...previous, [name]: Number(m[2]) };
}

function byteSize(v: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(|b|kb|kib|mb|mib|gb|gib)$/i.exec(v.trim());
  const unit: Record<string, number> = { '': 1, b: 1, kb: 1e3, kib: 2 ** 10, mb: 1e6, mib: 2 ** 20, gb: 1e9, gib: 2 ** 30 };
  const bytes = m ? Math.floor(Number(m[1]) * unit[m[2]!.toLowerCase()]!) : NaN;
  if (!(bytes > 0)) throw new InvalidArgumentError(`expected a size such as 512MiB, 2GB or 1048576`);
  return bytes;
}

/** --dtype of generate, bench and train: the weight dtypes and int4 (packed 4-bit, --group-size along K). */
const LOAD_DTYPES = ['fp8', 'int4', 'float32', 'float16', 'bfloat16'] as const;
const LOAD_DTYPE_HELP = 'fp8 / int4 quantize linear weights at load (int4: affine, groups of --group-size along K); float32/float16/bfloat16 convert them';
const GROUP_SIZE_HELP = 'int4 group size along K: 32, 64 or 128 (default 128)';

/** --device, the same flag on every command that runs kernels. */
const deviceFlag = () => new Option('--device <device>', 'auto, webgpu or cpu').argParser(deviceName).default('auto');
/** --dtype: the load dtypes, unless a command takes fewer. */
const dtypeFlag = (help = LOAD_DTYPE_HELP, dtypes: readonly string[] = LOAD_DTYPES) => new Option('--dtype <dtype>', help).argParser(choice(dtypes));
/** int4's --group-size. */
const groupSizeFlag = () => new Option('--group-size <g>', GROUP_SIZE_HELP).argParser(positiveInt);

/** The `tensorgpu` command line, every subcommand with its flags. Flag values are checked as they are parsed. */
export function buildProgram(): Command {
  const program = new Command('tensorgpu')
    .description('TypeScript tensors with WebGPU kernels')
    .version(packageVersion(), '-V, --version', 'print the tensorgpu version')
    // An option error is one line naming the flag (and a "did you mean"), not the whole help text; set before the
    // subcommands are added, which inherit it.
    .configureOutput({ outputError: (text, write) => write(`tensorgpu: ${oneLineError(text)}\n`) })
    .showSuggestionAfterError(true);

  program
    .command('doctor')
    .description('say whether WebGPU is usable here, and if not, why and what to do (exit code 1 when not)')
    .option('--json', 'print the diagnosis as JSON')
    .action(async (opts: { json?: boolean }) => {
      process.exitCode = await runDoctor({ json: opts.json });
    });

  program
    .command('demo')
    .description('run a matmul and an elementwise chain on the best device and check them against the CPU backend')
    .addOption(deviceFlag())
    .option('--size <n>', 'square matmul size', positiveInt, 512)
    .action(async (opts: { device: 'auto' | 'webgpu' | 'cpu'; size: number }) => {
      process.exitCode = await runDemo({ device: opts.device, size: opts.size });
    });

  program
    .command('generate')
    .description(
      'stream text from a Qwen3 / Qwen3-MoE / LFM2 / LFM2-MoE / Qwen3.5 / Qwen3.6 checkpoint (default: a built-in random-weight Qwen3-MoE with the real tokenizer)',
    )
    .option(
      '--model <dir|repo>',
      `Hugging Face checkpoint directory (config.json, safetensors, tokenizer.json), a Hub repo id (org/name[@revision], downloaded into the Hugging Face cache), or ${BUILTIN_PREFIX}<preset> (${presetNames().join(', ')})`,
    )
    .option('--prompt <text>', 'the user message (or raw text with --raw)', 'Write a haiku about GPUs.')
    .option('--max-tokens <n>', "most tokens to generate (default: generation_config.json's max_new_tokens, else 32)", positiveInt)
    .option(
      '--temperature <t>',
      "sampling temperature, 0 = greedy (default: generation_config.json's, greedy if its do_sample is false, else 0.7)",
      numberIn('[0, inf)'),
    )
    .option('--top-k <k>', "top-k, 0 = off (default: generation_config.json's, else 20)", nonNegativeInt)
    .option('--top-p <p>', "nucleus probability, 1 = off (default: generation_config.json's, else 0.8)", numberIn('(0, 1]'))
    .option(
      '--min-p <p>',
      "drop tokens below this fraction of the top one's probability, 0 = off (default: generation_config.json's, else 0)",
      numberIn('[0, 1]'),
    )
    .option('--repetition-penalty <r>', "HF repetition penalty, 1 = off (default: generation_config.json's, else 1)", numberIn('(0, inf)'))
    .option('--seed <n>', 'sampling seed (an integer >= 0)', nonNegativeInt)
    .addOption(deviceFlag())
    .addOption(dtypeFlag())
    .addOption(groupSizeFlag())
    .option('--kv-dtype <dtype>', 'the KV cache: f32 (default), bf16, f16, or fp8 (e4m3 with a scale per position and kv head)', choice(KV_DTYPE_NAMES))
    .option('--raw', 'send the prompt as is, without the chat template')
    .option('--think', "let Qwen3 / Qwen3.5 think first (the chat template's enable_thinking)")
    .option(
      '--adapter <dir>',
      'a LoRA adapter (PEFT layout: adapter_config.json + adapter_model.safetensors, e.g. from `tensorgpu train`) merged into the weights',
    )
    .option('--compile', 'run the prefill through compile(): traced for the prompt length, recorded and replayed when a prompt of that length comes again')
    .option(
      '--speculative <kind>',
      'speculative decoding: ngram (prompt lookup), draft (--draft-model) or mtp (the multi-token-prediction layer Qwen3.5 / Qwen3.6 checkpoints ship, mtp.*); greedy output is unchanged',
      choice(SPECULATIVE_KINDS),
    )
    .option(
      '--draft-model <dir|repo>',
      `the draft model for --speculative draft: a folder, a repo id or ${BUILTIN_PREFIX}<preset>, with the target's tokenizer`,
    )
    .option('--num-speculative-tokens <k>', 'tokens drafted per verification (default 4)', positiveInt)
    .action(async (opts: GenerateCliOptions) => {
      process.exitCode = await runGenerate(opts);
    });

  program
    .command('train')
    .description(
      'fine-tune a Qwen3 / LFM2 / Qwen3.5 checkpoint on a text or JSONL file: LoRA adapters (PEFT layout) or --full (default: the built-in model on a built-in text)',
    )
    .option(
      '--model <dir|repo>',
      `Hugging Face checkpoint directory, a Hub repo id (org/name[@revision]), or ${BUILTIN_PREFIX}<preset> (${presetNames().join(', ')})`,
    )
    .option('--data <file>', 'training text: a .txt file, or .jsonl records with "text", "prompt" + "completion" or chat "messages" (default: a built-in text)')
    .option('--out <dir>', 'where the adapter (or the --full model), loss.png and losses.json go', 'tensorgpu-adapter')
    .option('--steps <n>', 'optimizer steps', positiveInt, 20)
    .option('--lr <lr>', 'peak learning rate (AdamW; linear warmup, then cosine decay)', numberIn('(0, inf)'), 2e-3)
    .option('--warmup <n>', 'warmup steps (default: a tenth of --steps)', positiveInt)
    .option('--seq-len <n>', 'tokens per packed training sequence', positiveInt, 32)
    .option('--lora-rank <r>', 'LoRA rank', positiveInt, 8)
    .option('--lora-alpha <a>', 'LoRA alpha (the delta is scaled by alpha / rank; default 2 x rank)', numberIn('(0, inf)'))
    .option(
      '--targets <modules>',
      'comma-separated projection names to adapt (default: every projection of a dense model; of an MoE model the attention (and conv) projections only, as an adapter on gate/up/down would sit on every expert)',
    )
    .option('--full', 'train every weight instead of LoRA adapters (a small model in float32 or bfloat16)')
    .option('--no-master-weights', 'with --full and 16-bit weights: update them directly, without float32 master copies')
    .option('--compile', "run each step through compile(): traced, fused and replayed from the third step (the update's step count on the device)")
    .option('--seed <n>', 'adapter initialization seed', nonNegativeInt, 0)
    .addOption(deviceFlag())
    .addOption(dtypeFlag('fp8 / int4 quantize the frozen base at load (int4 + LoRA: QLoRA); float32/float16/bfloat16 convert it'))
    .addOption(groupSizeFlag())
    .action(async (opts: TrainCliOptions) => {
      process.exitCode = await runTrain(opts);
    });

  program
    .command('bench')
    .description('prefill/decode tok/s, dispatches per token, bytes per token and peak GPU memory of a model (default: the built-in Qwen3-MoE)')
    .option(
      '--model <dir|repo>',
      `Hugging Face checkpoint directory, a Hub repo id (org/name[@revision]), or ${BUILTIN_PREFIX}<preset> (${presetNames().join(', ')})`,
    )
    .addOption(deviceFlag())
    .addOption(dtypeFlag())
    .addOption(groupSizeFlag())
    .option('--prompt-tokens <n>', 'prefill length', positiveInt, 32)
    .option('--decode-tokens <n>', 'decode steps', positiveInt, 16)
    .option('--moe <mode>', 'fused, per-expert or both', choice(['fused', 'per-expert', 'both'] as const), 'both')
    .option('--json', 'print the measurements as JSON')
    .option('--profile', 'also time every kernel on the GPU (timestamp queries) and print GPU time per kernel family')
    .option(
      '--quality',
      'also the mean KL of the next-token distributions of fp8 and int4 weights against bf16, and of f32 / bf16 / f16 / fp8 KV caches, over a fixed text',
    )
    .action(
      async (opts: {
        model?: string;
        device: 'auto' | 'webgpu' | 'cpu';
        dtype?: (typeof LOAD_DTYPES)[number];
        groupSize?: number;
        promptTokens: number;
        decodeTokens: number;
        moe: 'fused' | 'per-expert' | 'both';
        json?: boolean;
        profile?: boolean;
        quality?: boolean;
      }) => {
        process.exitCode = await runBench(opts);
      },
    );

  tilingOptions(
    program
      .command('vae-decode')
      .description(
        'decode video latents to PNG frames (and an animated preview) with a Wan2.x / Qwen-Image VAE (default: a built-in random-weight wan2.1-tiny and random latents)',
      )
      .option(
        '--model <dir|repo>',
        'diffusers AutoencoderKLWan / AutoencoderKLQwenImage folder (config.json, diffusion_pytorch_model.safetensors), the pipeline folder holding it in vae/, or a Hub repo id of the VAE (org/name/vae)',
      )
      .option('--latents <file>', '.safetensors or .npy latents [B, C, T, h, w], [C, T, h, w] or [C, h, w] (default: random normal [1, z_dim, 1, 16, 16])')
      .option('--out <path>', 'PNG to write; several frames become <stem>-0000.png, <stem>-0001.png, ...', 'out.png')
      .option('--preview <file>', 'animated preview of several frames: .gif (default <stem>.gif), or .mp4 / .webm through ffmpeg on PATH')
      .option('--no-preview', 'write no animated preview')
      .option('--fps <n>', 'frame rate of the preview', positiveInt, 16)
      .option('--seed <n>', 'seed of the default random latents', nonNegativeInt, 1)
      .addOption(deviceFlag())
      .option('--denormalize', "apply the config's latents_mean / latents_std (z * std + mean) before decoding, as the Wan pipeline does")
      .option('--compile', "run each chunk's decoder through compile(): from the fourth latent frame on, chunks replay one recording"),
    'decode',
  ).action(
    async (
      opts: TilingFlagValues & {
        model?: string;
        latents?: string;
        out: string;
        preview?: string | false;
        fps: number;
        seed: number;
        device: DeviceFlag;
        denormalize?: boolean;
        compile?: boolean;
      },
    ) => {
      process.exitCode = await runVaeDecode(opts);
    },
  );

  tilingOptions(
    program
      .command('vae-encode')
      .description(
        'encode PNG frames to video latents with a Wan2.x / Qwen-Image VAE, the inverse of vae-decode (default: the built-in random-weight wan2.1-tiny)',
      )
      .option(
        '--model <dir|repo>',
        'diffusers AutoencoderKLWan / AutoencoderKLQwenImage folder (config.json, diffusion_pytorch_model.safetensors), the pipeline folder holding it in vae/, or a Hub repo id of the VAE (org/name/vae)',
      )
      .requiredOption(
        '--input <path>',
        'a PNG, numbered PNGs as a printf pattern (frames-%04d.png: from the first index in 0..4 to the first gap), or a video file (.mp4, .webm, .mov, .mkv, .avi, .gif: decoded by ffmpeg on PATH)',
      )
      .option('--out <file>', ".safetensors file for the latents (tensor 'latents', [1, z_dim, T, h, w])", 'latents.safetensors')
      .addOption(deviceFlag())
      .option('--normalize', "write (z - latents_mean) / latents_std with the config's statistics, as the Wan pipeline feeds its transformer"),
    'encode',
  ).action(async (opts: TilingFlagValues & { model?: string; input: string; out: string; device: DeviceFlag; normalize?: boolean }) => {
    process.exitCode = await runVaeEncode(opts);
  });

  const audio = program.command('audio').description('audio features on the device: Whisper log-mel and STFT spectrograms of a WAV file, drawn as a PNG');

  function audioCommand(name: AudioFeature, description: string, defaultOut: string): Command {
    return audio
      .command(`${name} [input]`)
      .description(description)
      .option('--out <file>', 'PNG to write (time on x, frequency on y)', defaultOut)
      .option('--save <file>', '.safetensors file for the feature tensor')
      .addOption(deviceFlag())
      .option('--seconds <n>', 'length of the built-in signal when no input is given', positiveInt, 10)
      .option('--scale <n>', 'pixels per value in the picture', positiveInt, 1)
      .option('--compile', 'run the front end through compile() (one call: traced, which is the eager run; the API replays later calls)');
  }

  audioCommand('mel', "Whisper's log-mel features (16 kHz; other rates are resampled) of a WAV file, default a built-in chirp + tones", 'mel.png')
    .option('--n-mels <n>', '80 (Whisper) or 128 (large-v3)', positiveInt, 80)
    .action(async (input: string | undefined, opts: Omit<AudioCliOptions, 'input'>) => {
      process.exitCode = await runAudio('mel', { ...opts, input });
    });

  audioCommand('spectrogram', 'an STFT power spectrogram in dB of a WAV file, default a built-in chirp + tones', 'spectrogram.png')
    .option('--n-fft <n>', 'FFT size (any length)', positiveInt, 512)
    .option('--hop <n>', 'hop between frames (default n-fft / 4)', positiveInt)
    .action(async (input: string | undefined, opts: Omit<AudioCliOptions, 'input'>) => {
      process.exitCode = await runAudio('spectrogram', { ...opts, input });
    });

  program
    .command('transcribe <file>')
    .description('speech to text with Whisper (openai/whisper decoding: timestamps, temperature fallback, 30 s windows); WAV, or mp3/m4a/... through ffmpeg')
    .option(
      '--model <dir|repo|builtin:whisper-tiny>',
      'a Whisper checkpoint folder or Hub id (openai/whisper-tiny ...); default the built-in random-weight preset',
    )
    .addOption(deviceFlag())
    .option('--language <code>', 'spoken language (en, de, ... or a name); detected from the first 30 s when absent')
    .option('--task <task>', 'transcribe, or translate (to English)', choice(['transcribe', 'translate'] as const), 'transcribe')
    .option('--output-format <format>', 'text, srt, vtt or json (segments)', choice(['text', 'srt', 'vtt', 'json'] as const), 'text')
    .option('--out <file>', 'write the transcript to this file instead of stdout')
    .option('--temperature <list>', 'temperature, or a comma-separated fallback list (default 0,0.2,0.4,0.6,0.8,1)')
    .option('--initial-prompt <text>', 'text the first window is conditioned on (names, spelling)')
    .option('--without-timestamps', 'decode with <|notimestamps|> (one segment per window)')
    .option('--max-tokens <n>', 'tokens sampled per 30 s window at most (default 224)', positiveInt)
    .option('--batch-windows <n>', '30 s windows encoded in one encoder forward (default 4 with --without-timestamps, else 1)', positiveInt)
    .addOption(dtypeFlag('fp8 / int4: quantize the attention and MLP projections at load (int4: affine, groups of --group-size along K)', ['fp8', 'int4']))
    .addOption(groupSizeFlag())
    .option('--no-capture', 'run every decoder step eagerly (no captured step)')
    .action(async (file: string, opts: Omit<TranscribeCliOptions, 'input' | 'noCapture'> & { capture?: boolean }) => {
      process.exitCode = await runTranscribe({ ...opts, input: file, noCapture: opts.capture === false });
    });

  const checkpoint = program.command('checkpoint').description('Hugging Face safetensors checkpoints: generate, inspect, load');

  checkpoint
    .command('generate')
    .description('write a random-weight Qwen3 / Qwen3-MoE / LFM2 / LFM2-MoE / Qwen3.5 / Qwen3.6 checkpoint in the Hugging Face layout')
    .requiredOption('--out <dir>', 'directory to write')
    .option('--preset <name>', presetNames().join(', '), choice(presetNames()), 'qwen3-moe-tiny')
    .option(
      '--dtype <dtype>',
      'bfloat16, float16, float32 or fp8 (e4m3 with 128x128 block scales)',
      choice(['bfloat16', 'float16', 'float32', 'fp8'] as const),
      'bfloat16',
    )
    .option('--seed <n>', 'random seed', nonNegativeInt, 1)
    .option('--shard-mb <n>', 'shard size limit in MiB (default: one file)', positiveInt)
    .action(async (opts: { out: string; preset: string; dtype: 'bfloat16' | 'float16' | 'float32' | 'fp8'; seed: number; shardMb?: number }) => {
      process.exitCode = await runGenerateCheckpoint(opts);
    });

  checkpoint
    .command('inspect <path|repo>')
    .description("list a checkpoint's tensors (directory or .safetensors file), validating every header")
    .action(async (path: string) => {
      process.exitCode = await runInspectCheckpoint(path);
    });

  checkpoint
    .command('load')
    .description('stream a whole checkpoint onto a device, with progress, throughput and memory figures')
    .requiredOption('--model <dir|repo>', 'checkpoint directory, .safetensors file or Hub repo id (org/name[@revision][/subfolder])')
    .addOption(deviceFlag())
    .addOption(dtypeFlag('fp8 / int4 quantize float linear weights at load (int4: the error of each is printed); float32/float16/bfloat16 convert'))
    .addOption(groupSizeFlag())
    .action(
      async (opts: { model: string; device: 'auto' | 'webgpu' | 'cpu'; dtype?: 'fp8' | 'int4' | 'float32' | 'float16' | 'bfloat16'; groupSize?: number }) => {
        process.exitCode = await runLoadCheckpoint(opts);
      },
    );

  program
    .command('serve')
    .description('an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /v1/models, /health, /metrics) over one model')
    .option(
      '--model <dir|repo>',
      `Hugging Face checkpoint directory, a Hub repo id (org/name[@revision]), or ${BUILTIN_PREFIX}<preset> (${presetNames().join(', ')})`,
    )
    .addOption(deviceFlag())
    .addOption(dtypeFlag())
    .addOption(groupSizeFlag())
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <n>', 'port to listen on (0 = any free port; the URL is printed)', port, 8000)
    .option('--api-key <key>', 'require Authorization: Bearer <key> on /v1/*')
    .option('--max-queue <n>', 'requests waiting behind the running one before 429', positiveInt, 64)
    .option('--max-body <bytes>', 'largest request body before 413', positiveInt, 1 << 20)
    .option(
      '--request-limit <name=value>',
      `raise or lower one of the limits requests are checked against before any work (repeatable): ${Object.keys(DEFAULT_REQUEST_LIMITS).join(', ')}`,
      requestLimit,
    )
    .option('--grammar-timeout <ms>', 'longest a response format may compile before the request is refused with 400', positiveInt, 10_000)
    .option('--grammar-workers <n>', 'most grammar engine worker threads (a new format compiles where it stalls no running sequence)', positiveInt, 3)
    .option('--served-model-name <name>', "the model name clients send (default: the --model spec, or the folder's name)")
    .option('--max-model-len <n>', 'positions per sequence, prompt + completion (default: min(max_position_embeddings, 4096))', positiveInt)
    .option('--shutdown-timeout <s>', 'seconds in-flight requests get to finish on SIGTERM / SIGINT', positiveInt, 10)
    .option('--max-batch <n>', 'most sequences sharing a decode step (continuous batching; 1 runs one request at a time)', positiveInt, 16)
    .option(
      '--kv-memory <size>',
      'bytes of the paged KV cache, e.g. 512MiB or 2GB (default: max-batch full-context sequences, at most 1 GiB); when full, requests wait',
      byteSize,
    )
    .option('--kv-page-size <n>', 'positions per KV cache page', positiveInt, 16)
    .option(
      '--kv-dtype <dtype>',
      'the KV pool: f32 (default), bf16, f16, or fp8 (e4m3 with a scale per position and kv head: about twice the positions of bf16 in --kv-memory)',
      choice(KV_DTYPE_NAMES),
    )
    .option('--prefill-chunk <n>', 'prompt tokens per prefill chunk, interleaved with the running decodes', positiveInt, 128)
    .option(
      '--prefill-tokens-per-step <n>',
      "prompt tokens prefilled per scheduler step, over the joining requests' whole chunks (default 4 x --prefill-chunk)",
      positiveInt,
    )
    .option(
      '--no-prefix-cache',
      'do not share the KV pages of common prompt prefixes between requests (shared by default; cached pages are evicted when --kv-memory runs out)',
    )
    .option(
      '--transcribe-model <dir|repo>',
      'also serve a Whisper model (a folder, a Hub id such as openai/whisper-tiny, or builtin:whisper-tiny) at /v1/audio/transcriptions and /v1/audio/translations',
    )
    .option('--max-audio-size <size>', 'largest audio upload to the audio routes, e.g. 25MiB (the default)', byteSize)
    .option(
      '--speculative <kind>',
      'speculative decoding for every request (requests then run one at a time): ngram, draft (--draft-model) or mtp (the multi-token-prediction layer of Qwen3.5 / Qwen3.6 checkpoints)',
      choice(SPECULATIVE_KINDS),
    )
    .option('--draft-model <dir|repo>', `the draft model for --speculative draft (a folder, a repo id or ${BUILTIN_PREFIX}<preset>)`)
    .option('--num-speculative-tokens <k>', 'tokens drafted per verification (default 4)', positiveInt)
    .action(async (opts: ServeCliOptions) => {
      process.exitCode = await runServe(opts);
    });

  program
    .command('web')
    .description('serve the browser pages (the chat demo on WebGPU in the page) on 127.0.0.1')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <n>', 'port to listen on (0 = any free port)', port, 8080)
    .option('--dir <dir>', 'the folder to serve (default: the built dist/web)')
    .action(async (opts: WebCliOptions) => {
      process.exitCode = await runWeb(opts);
    });

  const models = program
    .command('models')
    .description('models in the shared Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub)');

  models
    .command('list', { isDefault: true })
    .description('list cached models: revisions, size on disk, and whether tensorgpu can run each (the default)')
    .option('--json', 'print the listing as JSON')
    .action(async (opts: { json?: boolean }) => {
      process.exitCode = await runModelsList(opts);
    });

  models
    .command('rm <repo>')
    .description('remove a cached model (org/name), or with --revision one snapshot, its refs and the blobs only it links to; asks nothing')
    .option('--revision <rev>', 'a ref (main, a tag) or a commit (7+ hex characters)')
    .action(async (repo: string, opts: { revision?: string }) => {
      process.exitCode = await runModelsRm(repo, opts);
    });

  return program;
}
