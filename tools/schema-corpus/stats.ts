// Distribution of JSON-schema request-limit metrics over schema corpora.
//
//   npx tsx tools/schema-corpus/stats.ts [--top N] [--by-source] [--dedupe] [--no-ajv] [--json OUT] [--limits k=v,...] [label=]PATH...
//
// PATH is a file or a folder (searched recursively for *.json) holding plain schemas, JSONSchemaBench
// wrappers or the fixture format (see corpus.ts). Prints, per metric, p50 / p99 / p99.9 / max per corpus
// (or per sub-folder with --by-source) and over everything, the N most extreme schemas per metric, tool-set
// sizes, and how many schemas pass the draft-07 and 2020-12 meta-schemas (ajv validateSchema, strict: false),
// split by the schema's declared `$schema`, with the most common failures. With --limits (e.g.
// `depth=48,bytes=2097152,tools=128`; keys are the metric names, plus `tools` / `toolBytes` for tool sets) it also
// counts, per corpus, the schemas and tool sets each limit would reject. --dedupe counts identical schemas
// (same compact JSON) once, under the first input that has them.

import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { isObject, type Json, loadCorpus, METRIC_NAMES, percentile, type SchemaMetrics, schemaMetrics, type ToolSetMetrics, toolSetMetrics } from './corpus.js';

interface Options {
  top: number;
  bySource: boolean;
  ajv: boolean;
  dedupe: boolean;
  json?: string;
  limits: Map<string, number>;
  inputs: string[];
}

function parseArgs(argv: string[]): Options {
  const o: Options = { top: 5, bySource: false, ajv: true, dedupe: false, limits: new Map(), inputs: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--top') o.top = Number(argv[++i]);
    else if (a === '--by-source') o.bySource = true;
    else if (a === '--no-ajv') o.ajv = false;
    else if (a === '--dedupe') o.dedupe = true;
    else if (a === '--json') o.json = argv[++i];
    else if (a === '--limits') {
      for (const kv of argv[++i].split(',')) {
        const [k, v] = kv.split('=');
        const known = (METRIC_NAMES as readonly string[]).includes(k) || k === 'tools' || k === 'toolBytes';
        if (!known || !Number.isFinite(Number(v))) throw new Error(`bad --limits entry '${kv}'`);
        o.limits.set(k, Number(v));
      }
    } else o.inputs.push(a);
  }
  if (o.inputs.length === 0) {
    console.error('usage: stats.ts [--top N] [--by-source] [--dedupe] [--no-ajv] [--json OUT] [--limits k=v,...] [label=]PATH...');
    process.exit(2);
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// meta-schema validation

type Validator = Ajv | Ajv2020;

function makeValidators(): { draft07: Validator; draft2020: Validator } {
  const opts = { strict: false, validateFormats: false, allErrors: false } as const;
  return { draft07: new Ajv(opts), draft2020: new Ajv2020(opts) };
}

/** canonical `$schema` label: scheme-less, no trailing `#`, known drafts shortened */
function declaredDraft(schema: Json): string {
  if (!isObject(schema)) return typeof schema === 'boolean' ? '(boolean schema)' : '(not an object)';
  const s = schema.$schema;
  if (s === undefined) return '(none)';
  if (typeof s !== 'string') return '(non-string $schema)';
  const u = s
    .trim()
    .toLowerCase()
    .replace(/^https?:\/\//, '')
    .replace(/#$/, '')
    .replace(/\/$/, '');
  const m = /^json-schema\.org\/(draft-0\d|draft\/20\d\d-\d\d)\/(schema|hyper-schema)$/.exec(u);
  if (m) return m[2] === 'schema' ? m[1] : `${m[1]} hyper-schema`;
  if (u === 'json-schema.org/schema') return 'latest (json-schema.org/schema)';
  return 'other';
}

function pathShape(instancePath: string): string {
  // `/properties/foo/exclusiveMaximum` -> `exclusiveMaximum`; `/properties/foo/required` -> `required`
  const segs = instancePath.split('/').filter((s) => s.length > 0);
  const last = segs.at(-1);
  if (last === undefined) return '(root)';
  if (/^\d+$/.test(last)) return `${segs.at(-2) ?? ''}[]`;
  return last;
}

interface MetaResult {
  ok: boolean;
  /** `keyword @ path-shape: message` of the first (most specific) error */
  failure?: string;
  instancePath?: string;
}

function validateMeta(v: Validator, schema: Json): MetaResult {
  // validate against the validator's own meta-schema, whatever $schema says
  if (!isObject(schema) && typeof schema !== 'boolean') return { ok: false, failure: 'type @ (root): must be object,boolean', instancePath: '' };
  const s = isObject(schema) && '$schema' in schema ? Object.fromEntries(Object.entries(schema).filter(([k]) => k !== '$schema')) : schema;
  let ok: boolean;
  try {
    ok = v.validateSchema(s) === true;
  } catch (e) {
    return { ok: false, failure: `exception: ${(e as Error).message.slice(0, 80)}`, instancePath: '' };
  }
  if (ok) return { ok };
  const errs = v.errors ?? [];
  // ajv reports branch errors before the combinator error; prefer the first non-combinator one
  const e = errs.find((x) => x.keyword !== 'anyOf' && x.keyword !== 'oneOf' && x.keyword !== 'if') ?? errs[0];
  if (!e) return { ok, failure: 'unknown', instancePath: '' };
  return { ok, failure: `${e.keyword} @ ${pathShape(e.instancePath)}: ${e.message ?? ''}`, instancePath: e.instancePath };
}

/**
 * draft-dependent constructs that decide which meta-schema a schema can pass: boolExclusive = boolean
 * exclusiveMinimum/Maximum (draft-04), boolRequired = `required: true` (draft-03), itemsArray = array-form `items`
 * (tuples up to 2019-09; 2020-12 wants prefixItems), idFragment = `$id` with a non-empty #fragment (2020-12 forbids),
 * definitions / $defs = the draft-07 / 2019-09+ container names, kw2020 = prefixItems or $dynamicRef (2020-12 only)
 */
const CONSTRUCTS = {
  boolExclusive: (k: string, v: Json) => (k === 'exclusiveMinimum' || k === 'exclusiveMaximum') && typeof v === 'boolean',
  boolRequired: (k: string, v: Json) => k === 'required' && typeof v === 'boolean',
  itemsArray: (k: string, v: Json) => k === 'items' && Array.isArray(v),
  idFragment: (k: string, v: Json) => k === '$id' && typeof v === 'string' && /#./.test(v),
  definitions: (k: string) => k === 'definitions',
  $defs: (k: string) => k === '$defs',
  kw2020: (k: string) => k === 'prefixItems' || k === '$dynamicRef',
} as const;
type ConstructName = keyof typeof CONSTRUCTS;
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'definitions', '$defs', 'dependencies', 'dependentSchemas']);

/** which CONSTRUCTS a schema uses; keys of properties/definitions/... maps are names, not keywords */
function constructsOf(schema: Json): Set<ConstructName> {
  const found = new Set<ConstructName>();
  const names = Object.keys(CONSTRUCTS) as ConstructName[];
  const visit = (node: Json): void => {
    if (Array.isArray(node)) {
      for (const x of node) visit(x);
      return;
    }
    if (!isObject(node)) return;
    for (const [k, v] of Object.entries(node)) {
      for (const n of names) if (CONSTRUCTS[n](k, v)) found.add(n);
      if (k === 'enum' || k === 'const' || k === 'default' || k === 'examples') continue;
      if (SCHEMA_MAPS.has(k) && isObject(v)) for (const x of Object.values(v)) visit(x);
      else visit(v);
    }
  };
  visit(schema);
  return found;
}

class Counter<K> {
  readonly m = new Map<K, number>();
  add(k: K, n = 1): void {
    this.m.set(k, (this.m.get(k) ?? 0) + n);
  }
  get(k: K): number {
    return this.m.get(k) ?? 0;
  }
  sorted(): [K, number][] {
    return [...this.m.entries()].sort((a, b) => b[1] - a[1]);
  }
}

// ---------------------------------------------------------------------------------------------
// output helpers

function table(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const w = header.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  const line = (r: string[]): string => `| ${r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join(' | ')} |`;
  return [line(cells[0]), `|${w.map((x, i) => (i === 0 ? `${'-'.repeat(x + 1)}-` : `${'-'.repeat(x + 1)}:`)).join('|')}|`, ...cells.slice(1).map(line)].join(
    '\n',
  );
}

interface Dist {
  n: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

function dist(values: number[]): Dist {
  const s = [...values].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), p999: percentile(s, 99.9), max: s.at(-1) ?? Number.NaN };
}

// ---------------------------------------------------------------------------------------------

function main(): void {
  const o = parseArgs(process.argv.slice(2));
  const validators = o.ajv ? makeValidators() : undefined;

  const groupOf = (source: string): string => (o.bySource ? source : source.split('/')[0]);
  const schemaRows: { id: string; group: string; m: SchemaMetrics }[] = [];
  const toolRows: { id: string; group: string; m: ToolSetMetrics }[] = [];
  const parseErrors = new Counter<string>();
  const parseExamples: string[] = [];
  // meta-schema bookkeeping: per declared draft
  const drafts = new Counter<string>();
  const pass07 = new Counter<string>();
  const pass2020 = new Counter<string>();
  const fail07 = new Map<string, Counter<string>>();
  const fail2020 = new Map<string, Counter<string>>();
  const failExample = new Map<string, string>();
  const constructs = new Map<string, Counter<ConstructName>>();
  const noteFailure = (store: Map<string, Counter<string>>, draft: string, r: MetaResult, id: string): void => {
    const key = r.failure ?? 'unknown';
    let c = store.get(draft);
    if (!c) store.set(draft, (c = new Counter<string>()));
    c.add(key);
    if (!failExample.has(`${draft}\0${key}`)) failExample.set(`${draft}\0${key}`, `${id} ${r.instancePath ?? ''}`);
  };

  const seen = new Set<string>();
  let duplicates = 0;
  const t0 = Date.now();
  for (const input of o.inputs) {
    for (const item of loadCorpus(input)) {
      if (item.kind === 'parseError') {
        parseErrors.add(groupOf(item.entry.source));
        if (parseExamples.length < 5) parseExamples.push(`${item.entry.id}: ${item.entry.message}`);
        continue;
      }
      if (item.kind === 'toolSet') {
        toolRows.push({ id: item.entry.id, group: groupOf(item.entry.source), m: toolSetMetrics(item.entry.tools) });
        continue;
      }
      const { id, source, schema } = item.entry;
      if (o.dedupe) {
        const h = createHash('sha1').update(JSON.stringify(schema)).digest('base64');
        if (seen.has(h)) {
          duplicates++;
          continue;
        }
        seen.add(h);
      }
      schemaRows.push({ id, group: groupOf(source), m: schemaMetrics(schema) });
      if (validators) {
        const d = declaredDraft(schema);
        drafts.add(d);
        let cc = constructs.get(d);
        if (!cc) constructs.set(d, (cc = new Counter<ConstructName>()));
        for (const c of constructsOf(schema)) cc.add(c);
        const r07 = validateMeta(validators.draft07, schema);
        if (r07.ok) pass07.add(d);
        else noteFailure(fail07, d, r07, id);
        const r20 = validateMeta(validators.draft2020, schema);
        if (r20.ok) pass2020.add(d);
        else noteFailure(fail2020, d, r20, id);
      }
    }
  }
  const elapsed = ((Date.now() - t0) / 1000).toFixed(1);

  const groups = [...new Set(schemaRows.map((r) => r.group))].sort();
  console.log(
    `# schema corpus statistics\n\n${schemaRows.length} schemas, ${toolRows.length} tool sets, ${elapsed}s${o.dedupe ? ` (${duplicates} duplicate schemas skipped)` : ''}`,
  );
  if (parseErrors.m.size > 0) {
    console.log(
      `\nfiles that are not valid JSON (skipped): ${parseErrors
        .sorted()
        .map(([g, n]) => `${g} ${n}`)
        .join(', ')}`,
    );
    for (const e of parseExamples) console.log(`  e.g. ${e}`);
  }

  // summary: one row per metric over everything
  const summary: Record<string, Dist> = {};
  console.log('\n## all schemas\n');
  console.log(
    table(
      ['metric', 'n', 'p50', 'p99', 'p99.9', 'max'],
      METRIC_NAMES.map((k) => {
        const d = dist(schemaRows.map((r) => r.m[k]));
        summary[k] = d;
        return [k, d.n, d.p50, d.p99, d.p999, d.max];
      }),
    ),
  );
  if (toolRows.length > 0) {
    for (const k of ['tools', 'bytes'] as const) {
      const d = dist(toolRows.map((r) => r.m[k]));
      summary[`toolSet.${k}`] = d;
    }
    console.log('\n## tool sets (one per request)\n');
    const tgroups = [...new Set(toolRows.map((r) => r.group))].sort();
    const rows: (string | number)[][] = [];
    for (const k of ['tools', 'bytes'] as const) {
      for (const g of [...tgroups, 'ALL']) {
        const d = dist(toolRows.filter((r) => g === 'ALL' || r.group === g).map((r) => r.m[k]));
        rows.push([`${k} ${g}`, d.n, d.p50, d.p99, d.p999, d.max]);
      }
    }
    console.log(table(['metric / corpus', 'n', 'p50', 'p99', 'p99.9', 'max'], rows));
  }

  // per metric, per group
  console.log('\n## per corpus\n');
  for (const k of METRIC_NAMES) {
    const rows: (string | number)[][] = [];
    for (const g of groups) {
      const d = dist(schemaRows.filter((r) => r.group === g).map((r) => r.m[k]));
      rows.push([g, d.n, d.p50, d.p99, d.p999, d.max]);
    }
    console.log(`### ${k}\n\n${table(['corpus', 'n', 'p50', 'p99', 'p99.9', 'max'], rows)}\n`);
  }

  // extremes
  console.log(`## ${o.top} most extreme schemas per metric\n`);
  const extremes: Record<string, { id: string; value: number }[]> = {};
  for (const k of METRIC_NAMES) {
    const top = [...schemaRows].sort((a, b) => b.m[k] - a.m[k]).slice(0, o.top);
    extremes[k] = top.map((r) => ({ id: r.id, value: r.m[k] }));
    console.log(`- ${k}: ${top.map((r) => `${r.id} (${r.m[k]})`).join(', ')}`);
  }
  if (toolRows.length > 0) {
    for (const k of ['tools', 'bytes'] as const) {
      const top = [...toolRows].sort((a, b) => b.m[k] - a.m[k]).slice(0, o.top);
      extremes[`toolSet.${k}`] = top.map((r) => ({ id: r.id, value: r.m[k] }));
      console.log(`- toolSet.${k}: ${top.map((r) => `${r.id} (${r.m[k]})`).join(', ')}`);
    }
  }

  // limits
  const rejected: Record<string, Record<string, number>> = {};
  if (o.limits.size > 0) {
    console.log(`\n## what the limits reject (${[...o.limits].map(([k, v]) => `${k}=${v}`).join(', ')})\n`);
    const rows: (string | number)[][] = [];
    for (const [k, lim] of o.limits) {
      const isTool = k === 'tools' || k === 'toolBytes';
      const over: { id: string; group: string; v: number }[] = isTool
        ? toolRows.map((r) => ({ id: r.id, group: r.group, v: k === 'tools' ? r.m.tools : r.m.bytes })).filter((r) => r.v > lim)
        : schemaRows.map((r) => ({ id: r.id, group: r.group, v: r.m[k as keyof SchemaMetrics] })).filter((r) => r.v > lim);
      const perGroup = new Counter<string>();
      for (const r of over) perGroup.add(r.group);
      rejected[k] = Object.fromEntries(perGroup.sorted());
      over.sort((a, b) => b.v - a.v);
      rows.push([
        `${k} > ${lim}`,
        over.length,
        perGroup
          .sorted()
          .map(([g, n]) => `${g} ${n}`)
          .join(', ') || '-',
        over
          .slice(0, 3)
          .map((r) => `${r.id} (${r.v})`)
          .join(', ') || '-',
      ]);
    }
    console.log(table(['limit', 'rejected', 'by corpus', 'largest'], rows));
  }

  // meta-schema
  if (validators) {
    console.log('\n## meta-schema validation (ajv 8, strict: false; $schema removed before validating)\n');
    const rows = drafts.sorted().map(([d, n]) => [d, n, pass07.get(d), pass2020.get(d)]);
    const tot = schemaRows.length;
    const sum = (c: Counter<string>): number => [...c.m.values()].reduce((a, b) => a + b, 0);
    rows.push(['ALL', tot, sum(pass07), sum(pass2020)]);
    console.log(table(['declared $schema', 'schemas', 'pass draft-07', 'pass 2020-12'], rows));
    console.log('\n### draft-dependent constructs (schemas using each, by declared $schema; see CONSTRUCTS in stats.ts)\n');
    const cnames = Object.keys(CONSTRUCTS) as ConstructName[];
    const crow = (d: string): (string | number)[] => [d, drafts.get(d), ...cnames.map((c) => constructs.get(d)?.get(c) ?? 0)];
    const allRow: (string | number)[] = ['ALL', schemaRows.length, ...cnames.map((c) => [...constructs.values()].reduce((n, x) => n + x.get(c), 0))];
    console.log(table(['declared $schema', 'schemas', ...cnames], [...drafts.sorted().map(([d]) => crow(d)), allRow]));
    for (const [name, store] of [
      ['draft-07', fail07],
      ['2020-12', fail2020],
    ] as const) {
      console.log(`\n### typical failures against the ${name} meta-schema (first error per schema)\n`);
      for (const [d] of drafts.sorted()) {
        const c = store.get(d);
        if (!c) continue;
        console.log(`- declared ${d}:`);
        for (const [k, n] of c.sorted().slice(0, 8)) console.log(`  - ${n} × ${k}   e.g. ${failExample.get(`${d}\0${k}`)}`);
      }
    }
  }

  if (o.json) {
    const meta = validators
      ? Object.fromEntries(drafts.sorted().map(([d, n]) => [d, { schemas: n, passDraft07: pass07.get(d), pass2020: pass2020.get(d) }]))
      : undefined;
    writeFileSync(
      o.json,
      JSON.stringify({ inputs: o.inputs, schemas: schemaRows.length, toolSets: toolRows.length, summary, extremes, rejected, meta }, null, 2),
    );
  }
}

main();
