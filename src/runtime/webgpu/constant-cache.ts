// Small tables kernels upload (FFT twiddles, mel band ranges), kept on the device by key: an eager call uploads
// nothing after the first, and a recorded step, which may not upload, finds them there.
import type { StorageArray } from '../../core/codecs.js';
import type { GpuBuffer } from './gpu-context.js';
import type { WebGpuBackend } from './webgpu-backend.js';

/** Tables kept per device at most (the least recently used is released past it; a step binding it keeps it alive). */
const MAX_TABLES = 64;
const caches = new WeakMap<WebGpuBackend, Map<string, GpuBuffer>>();

/** The buffer holding make()'s values for key, uploaded on first use. Owned by the cache: never release it. */
export function cachedTable(backend: WebGpuBackend, key: string, make: () => StorageArray): GpuBuffer {
  let cache = caches.get(backend);
  if (!cache) caches.set(backend, (cache = new Map()));
  const hit = cache.get(key);
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const data = make();
  const buffer = backend.upload('float32', data);
  cache.set(key, buffer);
  if (cache.size > MAX_TABLES) {
    const [oldest, old] = cache.entries().next().value as [string, GpuBuffer];
    cache.delete(oldest);
    backend.release(old);
  }
  return buffer;
}
