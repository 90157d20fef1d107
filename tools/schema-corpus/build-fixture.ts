// Builds the compact committed corpus test/fixtures/serve/schema-corpus.json from full corpora.
//
//   npx tsx tools/schema-corpus/build-fixture.ts --out FILE [--cap BYTES] [--cap2 BYTES] [--depth-cap BYTES] [--per-metric N] [--sample N] [--sample-cap BYTES]
//     [--budget BYTES] [--source-note label=TEXT ...] [label=]PATH...
//
// Pass 1 measures every schema and tool set (see corpus.ts); pass 2 copies the chosen ones:
//  - per metric, the most extreme schema whose compact size is <= --cap (default 32 KiB; 64 KiB for depth),
//    then the next distinct values of at most --cap2 (8 KiB) each, --per-metric in all (the true corpus
//    maximum is recorded in `fullCorpusMax` even when it is too large to embed);
//  - the tool sets with the most tools and the most bytes, plus a few ordinary ones;
//  - about --sample ordinary schemas (compact size <= --sample-cap, 1.5 KiB), an equal share per corpus label
//    spread over its sub-sources, chosen with a fixed seed so a rebuild is reproducible.
// Identical schemas (same compact JSON) are kept once, under the first id seen: list curated corpora first.

import { writeFileSync } from 'node:fs';
import { rng } from '../int4-reference/int4_reference.js';
import { type Json, loadCorpus, METRIC_NAMES, type OpenAITool, type SchemaMetrics, schemaMetrics, type ToolSetMetrics, toolSetMetrics } from './corpus.js';

interface Args {
  out: string;
  cap: number;
  cap2: number;
  depthCap: number;
  perMetric: number;
  sample: number;
  sampleCap: number;
  budget: number;
  notes: Map<string, string>;
  inputs: string[];
}

function parseArgs(argv: string[]): Args {
  const a: Args = {
    out: '',
    cap: 32 << 10,
    cap2: 8 << 10,
    depthCap: 64 << 10,
    perMetric: 2,
    sample: 100,
    sampleCap: 1536,
    budget: 400_000,
    notes: new Map(),
    inputs: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i];
    if (x === '--out') a.out = argv[++i];
    else if (x === '--cap') a.cap = Number(argv[++i]);
    else if (x === '--cap2') a.cap2 = Number(argv[++i]);
    else if (x === '--depth-cap') a.depthCap = Number(argv[++i]);
    else if (x === '--per-metric') a.perMetric = Number(argv[++i]);
    else if (x === '--sample') a.sample = Number(argv[++i]);
    else if (x === '--sample-cap') a.sampleCap = Number(argv[++i]);
    else if (x === '--budget') a.budget = Number(argv[++i]);
    else if (x === '--source-note') {
      const v = argv[++i];
      const eq = v.indexOf('=');
      a.notes.set(v.slice(0, eq), v.slice(eq + 1));
    } else a.inputs.push(x);
  }
  if (!a.out || a.inputs.length === 0) {
    console.error(
      'usage: build-fixture.ts --out FILE [--cap BYTES] [--cap2 BYTES] [--depth-cap BYTES] [--per-metric N] [--sample N] [--sample-cap BYTES] [--budget BYTES] [--source-note label=TEXT] [label=]PATH...',
    );
    process.exit(2);
  }
  return a;
}

interface SchemaRow {
  id: string;
  source: string;
  m: SchemaMetrics;
}
interface ToolRow {
  id: string;
  source: string;
  m: ToolSetMetrics;
}

function main(): void {
  const a = parseArgs(process.argv.slice(2));

  // pass 1: metrics, dedup by content
  const rows: SchemaRow[] = [];
  const tools: ToolRow[] = [];
  const seen = new Set<string>();
  let duplicates = 0;
  for (const input of a.inputs) {
    for (const item of loadCorpus(input)) {
      if (item.kind === 'schema') {
        const key = JSON.stringify(item.entry.schema);
        if (seen.has(key)) {
          duplicates++;
          continue;
        }
        seen.add(key);
        rows.push({ id: item.entry.id, source: item.entry.source, m: schemaMetrics(item.entry.schema) });
      } else if (item.kind === 'toolSet') {
        tools.push({ id: item.entry.id, source: item.entry.source, m: toolSetMetrics(item.entry.tools) });
      }
    }
  }
  console.log(`${rows.length} distinct schemas (${duplicates} duplicates skipped), ${tools.length} tool sets`);

  const fullCorpusMax: Record<string, { value: number; id: string }> = {};
  for (const k of METRIC_NAMES) {
    const best = rows.reduce((p, r) => (r.m[k] > p.m[k] ? r : p), rows[0]);
    fullCorpusMax[k] = { value: best.m[k], id: best.id };
  }
  for (const k of ['tools', 'bytes'] as const) {
    const best = tools.reduce((p, r) => (r.m[k] > p.m[k] ? r : p), tools[0]);
    if (best) fullCorpusMax[`toolSet.${k}`] = { value: best.m[k], id: best.id };
  }

  // choose schemas
  const tags = new Map<string, string[]>();
  const tag = (id: string, t: string): void => {
    const l = tags.get(id);
    if (l) l.push(t);
    else tags.set(id, [t]);
  };
  for (const k of METRIC_NAMES) {
    // first pick: the most extreme schema of at most --cap bytes (--depth-cap for depth, the limit nearest to a
    // known crash, so the deepest real schema is worth its size; --cap2 for the size metric itself, whose
    // "largest that fits" says little); further picks: the next distinct values, at most --cap2 bytes each.
    // The auxiliary maxPropertiesOne and the size metric get one pick.
    const sorted = rows.filter((r) => r.m[k] > 0).sort((x, y) => y.m[k] - x.m[k]);
    const picked: SchemaRow[] = [];
    const want = k === 'bytes' || k === 'maxPropertiesOne' ? 1 : a.perMetric;
    for (const r of sorted) {
      if (picked.length >= want) break;
      const cap = picked.length > 0 || k === 'bytes' || k === 'maxPropertiesOne' ? a.cap2 : k === 'depth' ? a.depthCap : a.cap;
      if (r.m.bytes > cap || picked.some((p) => p.m[k] === r.m[k])) continue;
      picked.push(r);
    }
    for (const r of picked) tag(r.id, `extreme:${k}=${r.m[k]}`);
  }
  // ordinary sample: an equal share per corpus label, spread round-robin over its sub-sources
  const rand = rng(20250101);
  const byLabel = new Map<string, Map<string, SchemaRow[]>>();
  for (const r of rows) {
    if (r.m.bytes > a.sampleCap || tags.has(r.id)) continue;
    const label = r.source.split('/')[0];
    let m = byLabel.get(label);
    if (!m) byLabel.set(label, (m = new Map()));
    const l = m.get(r.source);
    if (l) l.push(r);
    else m.set(r.source, [r]);
  }
  const perLabel = Math.ceil(a.sample / Math.max(1, byLabel.size));
  for (const label of [...byLabel.keys()].sort()) {
    const pools = [...byLabel.get(label)!.entries()].sort((x, y) => (x[0] < y[0] ? -1 : 1)).map(([, p]) => p);
    let taken = 0;
    while (taken < perLabel && pools.some((p) => p.length > 0)) {
      for (const pool of pools) {
        if (taken >= perLabel) break;
        if (pool.length === 0) continue;
        const j = Math.floor(rand() * pool.length);
        tag(pool[j].id, 'sample');
        pool.splice(j, 1);
        taken++;
      }
    }
  }
  // choose tool sets
  const toolTags = new Map<string, string[]>();
  const ttag = (id: string, t: string): void => {
    const l = toolTags.get(id);
    if (l) l.push(t);
    else toolTags.set(id, [t]);
  };
  for (const k of ['tools', 'bytes'] as const) {
    const picked: ToolRow[] = [];
    for (const r of [...tools].sort((x, y) => y.m[k] - x.m[k])) {
      if (picked.length >= (k === 'tools' ? a.perMetric : 1)) break;
      if (!picked.some((p) => p.m[k] === r.m[k])) picked.push(r);
    }
    for (const r of picked) ttag(r.id, `extreme:${k}=${r.m[k]}`);
  }
  const ordinaryTools = tools.filter((t) => !toolTags.has(t.id) && t.m.bytes <= 4096);
  for (let i = 0; i < 4 && ordinaryTools.length > 0; i++) {
    const j = Math.floor(rand() * ordinaryTools.length);
    ttag(ordinaryTools[j].id, 'sample');
    ordinaryTools.splice(j, 1);
  }

  // pass 2: copy
  const schemas: { id: string; tags: string[]; schema: Json }[] = [];
  const toolSets: { id: string; tags: string[]; tools: OpenAITool[] }[] = [];
  for (const input of a.inputs) {
    for (const item of loadCorpus(input)) {
      if (item.kind === 'schema' && tags.has(item.entry.id) && !schemas.some((s) => s.id === item.entry.id)) {
        schemas.push({ id: item.entry.id, tags: tags.get(item.entry.id)!, schema: item.entry.schema });
      } else if (item.kind === 'toolSet' && toolTags.has(item.entry.id)) {
        toolSets.push({ id: item.entry.id, tags: toolTags.get(item.entry.id)!, tools: item.entry.tools });
      }
    }
  }
  const labels = a.inputs.map((i) => (i.includes('=') ? i.slice(0, i.indexOf('=')) : i));
  const source = labels.map((l) => `${l}: ${a.notes.get(l) ?? '(no note)'}`).join(' | ');
  const doc = {
    source,
    note: 'Built by tools/schema-corpus/build-fixture.ts (see tools/schema-corpus/README.md). tags: extreme:<metric>=<value> (the most extreme schemas small enough to embed), sample (ordinary schemas). fullCorpusMax: the maxima over the full corpora, which may be larger than anything embedded here.',
    fullCorpusMax,
    schemas,
    toolSets,
  };
  const text = `${JSON.stringify(doc)}\n`;
  const size = Buffer.byteLength(text);
  console.log(
    `${schemas.length} schemas (${[...tags.values()].filter((t) => t.some((x) => x.startsWith('extreme'))).length} extreme), ${toolSets.length} tool sets, ${size} bytes`,
  );
  for (const s of [...schemas, ...toolSets].sort((x, y) => JSON.stringify(y).length - JSON.stringify(x).length).slice(0, 15))
    console.log(`  ${JSON.stringify(s).length}  ${s.id}  ${s.tags.join(' ')}`);
  if (size > a.budget) {
    console.error(`over the budget of ${a.budget} bytes; lower --cap, --per-metric or --sample`);
    process.exit(1);
  }
  writeFileSync(a.out, text);
}

main();
