import { mkdir, open, readFile, rm, stat } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname } from 'node:path';

// Two tensorgpu processes (or two calls in one) fetching the same blob would append to the same .incomplete.
// huggingface_hub guards this with flock on <cache>/.locks/<repo folder>/<etag>.lock; Node has no flock, so this
// is an O_EXCL lock file beside it under a name of its own (Python leaves its .lock files behind, and an
// exclusive create on that name would then wait forever). It does not exclude a Python download of the same
// blob at the same moment; the size and hash check catches a file two writers mixed up.

const POLL_MS = 100;
/** A lock from another host is taken over when its file has not been touched for this long. */
const FOREIGN_STALE_MS = 10 * 60_000;

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether the holder written in the lock file can no longer be running. */
async function isStale(lockPath: string): Promise<boolean> {
  let text: string;
  let mtime: number;
  try {
    [text, mtime] = await Promise.all([readFile(lockPath, 'utf8'), stat(lockPath).then((s) => s.mtimeMs)]);
  } catch {
    return false; // gone already: the next create attempt decides
  }
  const [host, pid] = text.trim().split(' ');
  if (host !== hostname()) return Date.now() - mtime > FOREIGN_STALE_MS;
  return !(Number(pid) > 0 && pidAlive(Number(pid)));
}

/**
 * Runs `work` holding `lockPath`. While another holder has it, waits, and gives up waiting as soon as `done()`
 * says the other holder produced the result (the caller then finds the blob in place).
 */
export async function withBlobLock(lockPath: string, done: () => Promise<boolean>, work: () => Promise<void>): Promise<void> {
  await mkdir(dirname(lockPath), { recursive: true });
  for (;;) {
    try {
      const fh = await open(lockPath, 'wx');
      await fh.writeFile(`${hostname()} ${process.pid}`);
      await fh.close();
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (await done()) return;
    if (await isStale(lockPath)) {
      await rm(lockPath, { force: true });
      continue;
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  try {
    if (!(await done())) await work();
  } finally {
    await rm(lockPath, { force: true });
  }
}
