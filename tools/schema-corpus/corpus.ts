// Shared helpers for the schema-corpus tools: JSON types, corpus loading and per-schema metrics.
//
// Metrics are measured by a *generic* walk of the JSON document (every key named `enum`, `pattern`,
// `properties`, ... at any position), not by a schema-aware walk. That is what a cheap pre-check in the
// server does, and it is an upper bound of the schema-aware count, so limits derived from it are safe
// for either implementation.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative, sep } from 'node:path';

export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export interface SchemaEntry {
  id: string;
  /** corpus label + first sub-folder (e.g. `jsb/Kubernetes`) */
  source: string;
  schema: Json;
}

export interface OpenAITool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Json };
}

export interface ToolSetEntry {
  id: string;
  source: string;
  tools: OpenAITool[];
}

export interface ParseFailure {
  id: string;
  source: string;
  message: string;
}

export type CorpusItem = { kind: 'schema'; entry: SchemaEntry } | { kind: 'toolSet'; entry: ToolSetEntry } | { kind: 'parseError'; entry: ParseFailure };

export function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---------------------------------------------------------------------------------------------
// metrics

export interface SchemaMetrics {
  /** JSON document depth: scalar 0, `{}` / `[]` 1, `{"a":{}}` 2 (arrays count as a level) */
  depth: number;
  /** UTF-8 bytes of the compact JSON.stringify */
  bytes: number;
  /** values in the largest single `enum` array */
  maxEnum: number;
  /** values over all `enum` arrays */
  totalEnum: number;
  /** longest `pattern` string (characters) */
  maxPattern: number;
  /** longest `patternProperties` key (characters) */
  maxPatternKey: number;
  /** keys over all `properties` objects */
  properties: number;
  /** keys in the largest single `properties` object */
  maxPropertiesOne: number;
}

export const METRIC_NAMES: readonly (keyof SchemaMetrics)[] = [
  'depth',
  'bytes',
  'maxEnum',
  'totalEnum',
  'maxPattern',
  'maxPatternKey',
  'properties',
  'maxPropertiesOne',
];

export function jsonDepth(v: Json): number {
  if (Array.isArray(v)) {
    let d = 0;
    for (const x of v) d = Math.max(d, jsonDepth(x));
    return d + 1;
  }
  if (isObject(v)) {
    let d = 0;
    for (const k in v) d = Math.max(d, jsonDepth(v[k]));
    return d + 1;
  }
  return 0;
}

export function schemaMetrics(schema: Json): SchemaMetrics {
  const m: SchemaMetrics = {
    depth: jsonDepth(schema),
    bytes: Buffer.byteLength(JSON.stringify(schema), 'utf8'),
    maxEnum: 0,
    totalEnum: 0,
    maxPattern: 0,
    maxPatternKey: 0,
    properties: 0,
    maxPropertiesOne: 0,
  };
  const walk = (v: Json): void => {
    if (Array.isArray(v)) {
      for (const x of v) walk(x);
      return;
    }
    if (!isObject(v)) return;
    for (const k in v) {
      const x = v[k];
      if (k === 'enum' && Array.isArray(x)) {
        m.maxEnum = Math.max(m.maxEnum, x.length);
        m.totalEnum += x.length;
      } else if (k === 'pattern' && typeof x === 'string') {
        m.maxPattern = Math.max(m.maxPattern, x.length);
      } else if (k === 'patternProperties' && isObject(x)) {
        for (const p in x) m.maxPatternKey = Math.max(m.maxPatternKey, p.length);
      } else if (k === 'properties' && isObject(x)) {
        const n = Object.keys(x).length;
        m.properties += n;
        m.maxPropertiesOne = Math.max(m.maxPropertiesOne, n);
      }
      walk(x);
    }
  };
  walk(schema);
  return m;
}

export interface ToolSetMetrics {
  tools: number;
  /** UTF-8 bytes of the compact JSON.stringify of the whole `tools` array */
  bytes: number;
}

export function toolSetMetrics(tools: OpenAITool[]): ToolSetMetrics {
  return { tools: tools.length, bytes: Buffer.byteLength(JSON.stringify(tools), 'utf8') };
}

// ---------------------------------------------------------------------------------------------
// loading
//
// Accepted inputs (files or folders, searched recursively for *.json):
//  - the fixture format `{ source?, schemas: [{id, schema}], toolSets: [{id, tools}] }`
//  - JSONSchemaBench/maskbench wrappers `{ description, meta, schema, tests }` (the `schema` is used)
//  - a plain JSON schema (anything else)
// An argument `label=path` names the corpus; otherwise the basename of the path is the label.

function listJsonFiles(path: string): string[] {
  const st = statSync(path);
  if (!st.isDirectory()) return [path];
  const out: string[] = [];
  const stack = [path];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) stack.push(p);
      else if (name.endsWith('.json')) out.push(p);
    }
  }
  return out.sort();
}

function isFixture(v: Json): v is JsonObject {
  if (!isObject(v)) return false;
  const s = v.schemas;
  const t = v.toolSets;
  const okS = s === undefined || (Array.isArray(s) && s.every((e) => isObject(e) && typeof e.id === 'string' && 'schema' in e));
  const okT = t === undefined || (Array.isArray(t) && t.every((e) => isObject(e) && typeof e.id === 'string' && Array.isArray(e.tools)));
  return (s !== undefined || t !== undefined) && okS && okT;
}

function isWrapper(v: Json): v is JsonObject {
  return isObject(v) && 'schema' in v && ('tests' in v || 'meta' in v);
}

function sourceOf(label: string, id: string): string {
  const i = id.indexOf('/');
  return i < 0 ? label : `${label}/${id.slice(0, i)}`;
}

export function* loadCorpus(arg: string): Generator<CorpusItem> {
  const eq = arg.indexOf('=');
  const label = eq > 0 ? arg.slice(0, eq) : basename(arg).replace(/\.json$/, '');
  const root = eq > 0 ? arg.slice(eq + 1) : arg;
  const isDir = statSync(root).isDirectory();
  for (const file of listJsonFiles(root)) {
    const rel = isDir ? relative(root, file).split(sep).join('/') : basename(file);
    const relId = rel.replace(/\.json$/, '');
    let doc: Json;
    try {
      doc = JSON.parse(readFileSync(file, 'utf8')) as Json;
    } catch (e) {
      yield { kind: 'parseError', entry: { id: `${label}/${relId}`, source: sourceOf(label, relId), message: (e as Error).message.slice(0, 120) } };
      continue;
    }
    if (isFixture(doc)) {
      const prefix = isDir ? `${relId}/` : '';
      for (const e of (doc.schemas ?? []) as JsonObject[]) {
        const id = `${prefix}${e.id as string}`;
        yield { kind: 'schema', entry: { id: `${label}/${id}`, source: sourceOf(label, id), schema: e.schema } };
      }
      for (const e of (doc.toolSets ?? []) as JsonObject[]) {
        const id = `${prefix}${e.id as string}`;
        yield { kind: 'toolSet', entry: { id: `${label}/${id}`, source: sourceOf(label, id), tools: e.tools as unknown as OpenAITool[] } };
      }
    } else if (isWrapper(doc)) {
      yield { kind: 'schema', entry: { id: `${label}/${relId}`, source: sourceOf(label, relId), schema: doc.schema } };
    } else {
      yield { kind: 'schema', entry: { id: `${label}/${relId}`, source: sourceOf(label, relId), schema: doc } };
    }
  }
}

// ---------------------------------------------------------------------------------------------
// small statistics helpers

/** nearest-rank percentile of an ascending-sorted array */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}
