// `tensorgpu serve` as a process: prints its URL (port 0 = any free port), serves, and on SIGTERM drains,
// releases the device and exits 0.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { until } from './helpers.js';
import { writeTinyChatModel } from '../helpers/qwen3.js';

describe('tensorgpu serve', () => {
  it('listens on a free port, serves the model under --served-model-name, and exits 0 on SIGTERM', async () => {
    const dir = await writeTinyChatModel(5);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--model', dir, '--device', 'cpu', '--port', '0', '--served-model-name', 'served-tiny'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await until(async () => /listening on http:\/\/127\.0\.0\.1:\d+\/v1/.test(stdout), 30_000);
      const base = stdout.match(/(http:\/\/127\.0\.0\.1:\d+)\/v1/)![1]!;
      await until(async () => (await fetch(`${base}/health`)).status === 200, 30_000);
      const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string }[] };
      expect(models.data[0]!.id).toBe('served-tiny');
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(stderr).toMatch(/SIGTERM: draining/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 90_000);
});
