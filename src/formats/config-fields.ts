// Typed reads of a config.json object: every field checked, and an error that names the file and the field.
import { CheckpointError } from '../core/errors.js';

export type Json = Record<string, unknown>;

export class Fields {
  constructor(
    private readonly json: Json,
    private readonly file: string,
    private readonly prefix = '',
  ) {}

  fail(key: string, want: string): never {
    throw new CheckpointError(`${this.prefix}${key} must be ${want}, got ${JSON.stringify(this.json[key]) ?? 'nothing'}`, { file: this.file });
  }

  has(key: string): boolean {
    return this.json[key] !== undefined && this.json[key] !== null;
  }

  int(key: string, fallback?: number, min = 1): number {
    if (!this.has(key) && fallback !== undefined) return fallback;
    const v = this.json[key];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) this.fail(key, `an integer >= ${min}`);
    return v;
  }

  positive(key: string, fallback?: number): number {
    if (!this.has(key) && fallback !== undefined) return fallback;
    const v = this.json[key];
    if (typeof v !== 'number' || !(v > 0) || !Number.isFinite(v)) this.fail(key, 'a positive number');
    return v;
  }

  bool(key: string, fallback: boolean): boolean {
    if (!this.has(key)) return fallback;
    const v = this.json[key];
    if (typeof v !== 'boolean') this.fail(key, 'true or false');
    return v;
  }

  string(key: string, fallback?: string): string {
    if (!this.has(key) && fallback !== undefined) return fallback;
    const v = this.json[key];
    if (typeof v !== 'string') this.fail(key, 'a string');
    return v;
  }

  ints(key: string, min = 0): number[] {
    if (!this.has(key)) return [];
    const v = this.json[key];
    if (typeof v === 'number') return [this.int(key, undefined, min)];
    if (!Array.isArray(v) || !v.every((x) => Number.isSafeInteger(x) && x >= min)) this.fail(key, `an integer or a list of integers >= ${min}`);
    return v as number[];
  }

  /** A list of strings, each one of `allowed`. */
  strings<T extends string>(key: string, allowed: readonly T[]): T[] {
    const v = this.json[key];
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && (allowed as readonly string[]).includes(x)))
      this.fail(key, `a list of ${allowed.map((a) => `'${a}'`).join(' / ')}`);
    return v as T[];
  }

  object(key: string): Fields | undefined {
    if (!this.has(key)) return undefined;
    const v = this.json[key];
    if (typeof v !== 'object' || Array.isArray(v)) this.fail(key, 'an object');
    return new Fields(v as Json, this.file, `${this.prefix}${key}.`);
  }

  raw(): Json {
    return this.json;
  }
}
