// `tensorgpu serve` stops on SIGTERM and SIGINT (issue 40): the built command, as a process manager or a terminal
// runs it, closes the listener, releases the device and exits 0. (`npx tensorgpu serve` is another matter: npx does
// not pass SIGTERM on, so the README recommends node_modules/.bin/tensorgpu.)
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';

const MAIN = 'dist/cli/main.js';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Resolves with everything written so far once `pattern` appears in stdout + stderr; rejects if the process ends first. */
function waitFor(child: ChildProcess, output: { text: string }, pattern: RegExp, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`timed out waiting for ${pattern}; output:\n${output.text}`)), timeoutMs);
    const check = () => pattern.test(output.text) && done();
    const ended = () => done(new Error(`serve ended before ${pattern}; output:\n${output.text}`));
    const done = (err?: Error) => {
      clearTimeout(timer);
      child.stdout?.off('data', check);
      child.stderr?.off('data', check);
      child.off('exit', ended);
      err ? reject(err) : resolve();
    };
    child.stdout?.on('data', check);
    child.stderr?.on('data', check);
    child.once('exit', ended);
    check();
  });
}

async function serveThenSignal(
  signal: NodeJS.Signals,
  when: 'loaded' | 'listening',
): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [MAIN, 'serve', '--device', 'cpu', '--model', 'builtin:qwen3-tiny', '--port', String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { text: '' };
  child.stdout.on('data', (c: Buffer) => (output.text += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output.text += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  try {
    if (when === 'loaded') {
      // Once the model is loaded (/health says ok), a signal must still end it: nothing else is left to wait for.
      await waitFor(child, output, /model .* on cpu \(loaded in/, 120_000);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    } else await waitFor(child, output, /listening on http/, 120_000);
    child.kill(signal);
    const result = await Promise.race([
      exited,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no exit 20 s after ${signal}:\n${output.text}`)), 20_000)),
    ]);
    return { ...result, output: output.text, port };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

describe.skipIf(!existsSync(MAIN))('tensorgpu serve stops on signals (the built command; `npm run build` first)', () => {
  for (const [signal, when] of [
    ['SIGTERM', 'loaded'],
    ['SIGINT', 'loaded'],
    ['SIGTERM', 'listening'],
  ] as const) {
    it(`${signal} once the model is ${when}: drains, closes the port and exits 0`, async () => {
      const r = await serveThenSignal(signal, when);
      expect(r.signal).toBeNull();
      expect(r.code).toBe(0);
      expect(r.output).toContain(`tensorgpu serve: ${signal}: draining`);
      // The port is free again: a new listener gets it.
      await new Promise<void>((resolve, reject) => {
        const s = createServer();
        s.once('error', reject);
        s.listen(r.port, '127.0.0.1', () => s.close(() => resolve()));
      });
    }, 180_000);
  }
});
