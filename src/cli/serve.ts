// `tensorgpu serve`: the OpenAI-compatible HTTP server (src/serve/) over one model. Listens first (so /health says
// 503 while the model loads), prints the URL, and on SIGTERM / SIGINT drains, releases the device and exits 0.
import { basename } from 'node:path';
import { releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import type { LoadedModel } from '../models/load.js';
import { startServer } from '../serve/server.js';
import { openModel } from './model-source.js';

export interface ServeCliOptions {
  model?: string;
  device: DeviceRequest;
  dtype?: 'fp8' | 'float32' | 'float16' | 'bfloat16';
  host: string;
  port: number;
  apiKey?: string;
  maxQueue: number;
  /** Bytes. */
  maxBody: number;
  servedModelName?: string;
  /** Positions per sequence (default: min(max_position_embeddings, 4096)). */
  maxModelLen?: number;
  /** Seconds in-flight requests get to finish on SIGTERM / SIGINT before they are cancelled. */
  shutdownTimeout: number;
  maxBatch?: number;
  /** Bytes. */
  kvMemory?: number;
  kvPageSize?: number;
  prefillChunk?: number;
  /** false with --no-prefix-cache. */
  prefixCache?: boolean;
}

export async function runServe(o: ServeCliOptions, log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<number> {
  const servedModelName =
    o.servedModelName ??
    (o.model ? (o.model.includes('/') && !o.model.startsWith('.') && !o.model.startsWith('/') ? o.model : basename(o.model)) : 'tensorgpu-default');
  let loaded: LoadedModel | undefined;
  const opening = openModel({ model: o.model, device: o.device, dtype: o.dtype, maxSequence: o.maxModelLen, log }).then((m) => {
    loaded = m.loaded;
    log(`model ${m.dir} on ${m.device} (loaded in ${(m.loadMs / 1000).toFixed(1)} s), served as '${servedModelName}'`);
    return m.loaded;
  });
  try {
    const server = await startServer({
      model: opening,
      servedModelName,
      host: o.host,
      port: o.port,
      apiKey: o.apiKey,
      maxQueue: o.maxQueue,
      maxBodyBytes: o.maxBody,
      maxBatch: o.maxBatch,
      kvMemoryBytes: o.kvMemory,
      kvPageSize: o.kvPageSize,
      prefillChunk: o.prefillChunk,
      prefixCache: o.prefixCache,
      log,
    });
    process.stdout.write(`tensorgpu serve: listening on ${server.url}/v1\n`);
    const signal = new Promise<NodeJS.Signals>((resolve) => {
      process.once('SIGTERM', () => resolve('SIGTERM'));
      process.once('SIGINT', () => resolve('SIGINT'));
    });
    try {
      // A model that fails to load ends the command (with the listener closed), as a signal does.
      const outcome = await Promise.race([signal, server.ready.then(() => signal)]);
      log(`tensorgpu serve: ${outcome}: draining (up to ${o.shutdownTimeout} s)`);
    } finally {
      await server.close(o.shutdownTimeout * 1000);
    }
    return 0;
  } finally {
    await opening.catch(() => undefined);
    loaded?.model.dispose();
    releaseDevice();
  }
}
