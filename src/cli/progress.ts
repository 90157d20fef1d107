// A byte-count progress bar for long loads (bytes, rate, ETA) through cli-progress; silent when stderr is not a
// terminal, so logs and pipes get no control characters.
import { MultiBar, SingleBar } from 'cli-progress';

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

/** What a Hub download reports (src/hub/download.ts's DownloadProgress). */
export interface TransferProgress {
  readonly file: string;
  readonly fileBytes: number;
  readonly fileTotal: number;
  readonly bytes: number;
  readonly total: number;
}

/**
 * Progress of a model download on stderr when it is a TTY: a bar per file in transfer and one for all files, each
 * with bytes, rate and ETA; nothing is drawn until the first byte, so a cached model prints nothing.
 */
export function downloadProgress(label: string, options: { force?: boolean } = {}): { onProgress: (p: TransferProgress) => void; stop: () => void } {
  const stream = process.stderr;
  if (!stream.isTTY && !options.force) return { onProgress() {}, stop() {} };
  let bars: MultiBar | undefined;
  let all: SingleBar | undefined;
  const files = new Map<string, { bar: SingleBar; started: number }>();
  let started = 0;
  const payload = (name: string, done: number, total: number, since: number) => ({
    name,
    doneBytes: formatBytes(done),
    totalBytes: formatBytes(total),
    rate: formatBytes(done / Math.max(1e-3, (performance.now() - since) / 1000)),
  });
  return {
    onProgress(p) {
      if (!bars) {
        started = performance.now();
        bars = new MultiBar({
          format: '{name} [{bar}] {percentage}% | {doneBytes} / {totalBytes} | {rate}/s | ETA {eta_formatted}',
          stream,
          hideCursor: true,
          clearOnComplete: false,
          etaBuffer: 50,
        });
        all = bars.create(p.total, 0, payload(label, 0, p.total, started));
      }
      let f = files.get(p.file);
      if (!f) {
        f = { bar: bars.create(p.fileTotal, 0, payload(`  ${p.file}`, 0, p.fileTotal, performance.now())), started: performance.now() };
        files.set(p.file, f);
      }
      f.bar.update(p.fileBytes, payload(`  ${p.file}`, p.fileBytes, p.fileTotal, f.started));
      if (p.fileBytes >= p.fileTotal) {
        bars.remove(f.bar);
        files.delete(p.file);
      }
      all!.setTotal(p.total);
      all!.update(p.bytes, payload(label, p.bytes, p.total, started));
    },
    stop() {
      bars?.stop();
    },
  };
}
