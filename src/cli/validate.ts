// The CLI's flag checks, run before anything loads: commander parsers that throw InvalidArgumentError with what was
// expected (main.ts's error output puts the flag and the value in front: `--top-p 5: expected a number in (0, 1]`),
// a "did you mean" for enum values, and checks of the files, folders and ports flags name.
import { statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { InvalidArgumentError } from 'commander';

/** A flag whose value cannot be used; the message starts with the flag and its value. */
export class FlagError extends Error {
  constructor(flag: string, value: string | number, problem: string) {
    super(`${flag} ${value}: ${problem}`);
    this.name = 'FlagError';
  }
}

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

/** 0, 1, 2, ... (seeds). */
export function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected an integer >= 0');
  return n;
}

export function number(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError('expected a number');
  return n;
}

/** A number in a range, e.g. numberIn('(0, 1]'): parentheses exclude the bound, brackets include it; inf for none. */
export function numberIn(range: string): (value: string) => number {
  const m = /^([[(])\s*(-?[\d.e-]+|-inf)\s*,\s*(-?[\d.e-]+|inf)\s*([\])])$/.exec(range);
  if (!m) throw new Error(`bad range ${range}`);
  const lo = m[2] === '-inf' ? -Infinity : Number(m[2]);
  const hi = m[3] === 'inf' ? Infinity : Number(m[3]);
  const text = hi === Infinity ? (m[1] === '[' ? `>= ${lo}` : `> ${lo}`) : range;
  return (value) => {
    const n = Number(value);
    const ok = value.trim() !== '' && !Number.isNaN(n) && (m[1] === '[' ? n >= lo : n > lo) && (m[4] === ']' ? n <= hi : n < hi);
    if (!ok) throw new InvalidArgumentError(`expected a number ${hi === Infinity ? text : `in ${text}`}`);
    return n;
  };
}

/** A TCP port, 0 (any free port) to 65535. */
export function port(value: string): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || n > 65535) throw new InvalidArgumentError('expected a port from 0 (any free port) to 65535');
  return n;
}

/** Edit distance, for "did you mean". */
function distance(a: string, b: string): number {
  const d = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = d[0]!;
    d[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const here = d[j]!;
      d[j] = Math.min(d[j]! + 1, d[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = here;
    }
  }
  return d[b.length]!;
}

/** The allowed value closest to `value`, when it is close enough to be a typo. */
export function closest(value: string, allowed: readonly string[]): string | undefined {
  const v = value.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const a of allowed) {
    const d = a.startsWith(v) && v.length > 0 ? 0.5 : distance(v, a.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [a, d];
  }
  return bestDistance <= Math.max(1, Math.floor((best?.length ?? 0) / 3)) ? best : undefined;
}

/** One of `allowed`, with a "did you mean" when the value is a typo of one. */
export function choice<T extends string>(allowed: readonly T[]): (value: string) => T {
  return (value) => {
    if ((allowed as readonly string[]).includes(value)) return value as T;
    const near = closest(value, allowed);
    throw new InvalidArgumentError(`expected one of ${allowed.join(', ')}${near ? ` (did you mean ${near}?)` : ''}`);
  };
}

export const DEVICE_NAMES = ['auto', 'webgpu', 'cpu'] as const;
export const deviceName = choice(DEVICE_NAMES);

/**
 * Commander's error text as one line naming the flag: "option '--top-p <p>' argument '5' is invalid. expected ..."
 * becomes "--top-p 5: expected ...", and "(Did you mean --device?)" joins the line it belongs to.
 */
export function oneLineError(text: string): string {
  const t = text.trim().replace(/^error:\s*/, '');
  const invalid = /^option '(-{1,2}[\w-]+)(?:, (--[\w-]+))?[^']*' argument '([\s\S]*)' is invalid\. ([\s\S]*)$/.exec(t);
  if (invalid) return `${invalid[2] ?? invalid[1]} ${invalid[3]}: ${invalid[4]!.trim()}`;
  const arg = /^command-argument value '([\s\S]*)' is invalid for argument '([^']*)'\. ([\s\S]*)$/.exec(t);
  if (arg) return `<${arg[2]}> ${arg[1]}: ${arg[3]!.trim()}`;
  return t
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => l.replace(/^\(Did you mean (.*)\)$/, '(did you mean $1)'))
    .join(' ');
}

/** Throws FlagError unless `path` is a readable file. */
export function checkFile(flag: string, path: string): void {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) throw new FlagError(flag, path, 'no such file');
  if (!stat.isFile()) throw new FlagError(flag, path, 'not a file');
}

/** Throws FlagError unless `path` is a folder (holding `mustHave`, when given). */
export function checkDir(flag: string, path: string, mustHave?: string): void {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) throw new FlagError(flag, path, 'no such folder');
  if (!stat.isDirectory()) throw new FlagError(flag, path, 'not a folder');
  if (mustHave && !statSync(join(path, mustHave), { throwIfNoEntry: false })) throw new FlagError(flag, path, `the folder has no ${mustHave}`);
}

/** Resolves when host:port can be listened on; rejects with one line naming --port when it cannot. */
export function checkPortFree(host: string, portNumber: number): Promise<void> {
  if (portNumber === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (e: NodeJS.ErrnoException) => reject(listenError(host, portNumber, e)));
    server.listen({ host, port: portNumber, exclusive: true }, () => server.close(() => resolve()));
  });
}

/** A listen failure (EADDRINUSE, EACCES, EADDRNOTAVAIL) as one line naming the flag. */
export function listenError(host: string, portNumber: number, e: NodeJS.ErrnoException): Error {
  if (e.code === 'EADDRINUSE')
    return new FlagError(
      '--port',
      portNumber,
      `${host}:${portNumber} is already in use (another server is listening; pick another port, or 0 for any free one)`,
    );
  if (e.code === 'EACCES') return new FlagError('--port', portNumber, `not allowed to listen on ${host}:${portNumber} (ports below 1024 need privileges)`);
  if (e.code === 'EADDRNOTAVAIL' || e.code === 'ENOTFOUND') return new FlagError('--host', host, `not an address of this machine (${e.code})`);
  return new FlagError('--port', portNumber, `cannot listen on ${host}:${portNumber}: ${e.message}`);
}
