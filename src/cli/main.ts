#!/usr/bin/env node
// The `tensorgpu` command. Each subcommand lives in its own module; this file only parses arguments.
import { Command, InvalidArgumentError } from 'commander';
import { runDemo } from './demo.js';
import { runDoctor } from './doctor.js';

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`expected a positive integer, got '${value}'`);
  return n;
}

function deviceName(value: string): 'auto' | 'webgpu' | 'cpu' {
  if (value === 'auto' || value === 'webgpu' || value === 'cpu') return value;
  throw new InvalidArgumentError(`expected auto, webgpu or cpu, got '${value}'`);
}

const program = new Command('tensorgpu').description('TypeScript tensors with WebGPU kernels').showHelpAfterError();

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
  .option('--device <device>', 'auto, webgpu or cpu', deviceName, 'auto')
  .option('--size <n>', 'square matmul size', positiveInt, 512)
  .action(async (opts: { device: 'auto' | 'webgpu' | 'cpu'; size: number }) => {
    process.exitCode = await runDemo({ device: opts.device, size: opts.size });
  });

program.parseAsync().catch((err: unknown) => {
  console.error(`tensorgpu: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
