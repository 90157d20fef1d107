// A byte-count progress bar for long loads (bytes, rate, ETA) through cli-progress; silent when stderr is not a
// terminal, so logs and pipes get no control characters.
import { SingleBar } from 'cli-progress';

export interface ByteProgress {
  add(bytes: number): void;
  stop(): void;
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

/** A bar on stderr when it is a TTY (or `force`); otherwise a no-op. */
export function byteProgress(label: string, totalBytes: number, options: { force?: boolean } = {}): ByteProgress {
  const stream = process.stderr;
  if (!stream.isTTY && !options.force) return { add() {}, stop() {} };
  const started = performance.now();
  let done = 0;
  const bar = new SingleBar({
    format: `${label} [{bar}] {percentage}% | {doneBytes} / {totalBytes} | {rate}/s | ETA {eta_formatted}`,
    stream,
    hideCursor: true,
    clearOnComplete: false,
    etaBuffer: 50,
  });
  const payload = () => ({
    doneBytes: formatBytes(done),
    totalBytes: formatBytes(totalBytes),
    rate: formatBytes(done / Math.max(1e-3, (performance.now() - started) / 1000)),
  });
  bar.start(totalBytes, 0, payload());
  return {
    add(bytes: number) {
      done += bytes;
      bar.update(done, payload());
    },
    stop() {
      bar.stop();
    },
  };
}

/** What a Hub download reports (src/io/hub/download.ts's DownloadProgress). */
export interface TransferProgress {
  readonly file: string;
  readonly bytes: number;
  readonly total: number;
}

/**
 * Progress of a model download on stderr when it is a TTY: one bar over all files (bytes, rate, ETA) naming the
 * file in transfer; nothing is drawn until the first byte, so a fully cached model prints nothing.
 */
export function downloadProgress(label: string, options: { force?: boolean } = {}): { onProgress: (p: TransferProgress) => void; stop: () => void } {
  const stream = process.stderr;
  if (!stream.isTTY && !options.force) return { onProgress() {}, stop() {} };
  let bar: SingleBar | undefined;
  let started = 0;
  let total = 0;
  const payload = (p: TransferProgress) => ({
    file: p.file,
    doneBytes: formatBytes(p.bytes),
    totalBytes: formatBytes(p.total),
    rate: formatBytes(p.bytes / Math.max(1e-3, (performance.now() - started) / 1000)),
  });
  return {
    onProgress(p) {
      if (!bar) {
        started = performance.now();
        bar = new SingleBar({ format: `${label} [{bar}] {percentage}% | {doneBytes} / {totalBytes} | {rate}/s | ETA {eta_formatted} | {file}`, stream, hideCursor: true, clearOnComplete: false, etaBuffer: 50 });
        bar.start(p.total, 0, payload(p));
        total = p.total;
      }
      if (p.total !== total) {
        bar.setTotal(p.total);
        total = p.total;
      }
      bar.update(p.bytes, payload(p));
    },
    stop() {
      bar?.stop();
    },
  };
}
