// Normalises tool-calling corpora into the fixture format (`{ source, schemas, toolSets }`) so that
// stats.ts / build-fixture.ts can read them like any other corpus.
//
//   npx tsx tools/schema-corpus/collect.ts --out DIR \
//     [--bfcl <gorilla>/berkeley-function-call-leaderboard/bfcl_eval/data] \
//     [--mcp <github-mcp-server>/pkg/github/__toolsnaps__] \
//     [--maskbench <jsonschemabench>/maskbench/data [--synthetic DIR2]]
//
// Writes DIR/bfcl.json, DIR/mcp-github.json, DIR/maskbench-extra.json and, with --synthetic, DIR2/synthetic.json
// (JSONSchemaBench's artificial Handwritten/Synthesized feature tests: kept apart, they are no real-world data).
//
// BFCL stores Gorilla-style types (`dict`, `float`, `tuple`, Java/JS names ...). They are converted
// with the same table BFCL uses before sending tools to OpenAI-compatible endpoints
// (bfcl_eval/constants/type_mappings.py GORILLA_TO_OPENAPI, unknown types -> "string", `.` in names -> `_`),
// applied recursively to every schema position. Multi-turn / memory / web-search entries list
// `involved_classes`; their tools are the class's function docs (multi_turn_func_doc/*.json) minus
// `excluded_function`, as in bfcl_eval/constants/executable_backend_config.py.

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { isObject, type Json, type JsonObject, type OpenAITool } from './corpus.js';

const GORILLA_TO_OPENAPI: Record<string, string> = {
  integer: 'integer',
  number: 'number',
  float: 'number',
  string: 'string',
  boolean: 'boolean',
  bool: 'boolean',
  array: 'array',
  list: 'array',
  dict: 'object',
  object: 'object',
  tuple: 'array',
  any: 'string',
  byte: 'integer',
  short: 'integer',
  long: 'integer',
  double: 'number',
  char: 'string',
  ArrayList: 'array',
  Array: 'array',
  HashMap: 'object',
  Hashtable: 'object',
  Queue: 'array',
  Stack: 'array',
  Any: 'string',
  String: 'string',
  Bigint: 'integer',
};

const MULTI_TURN_FUNC_DOC: Record<string, string> = {
  GorillaFileSystem: 'gorilla_file_system.json',
  MathAPI: 'math_api.json',
  MessageAPI: 'message_api.json',
  TwitterAPI: 'posting_api.json',
  TicketAPI: 'ticket_api.json',
  TradingBot: 'trading_bot.json',
  TravelAPI: 'travel_booking.json',
  VehicleControlAPI: 'vehicle_control.json',
  WebSearchAPI: 'web_search.json',
  MemoryAPI_kv: 'memory_kv.json',
  MemoryAPI_vector: 'memory_vector.json',
  MemoryAPI_rec_sum: 'memory_rec_sum.json',
  // the memory category names the class `MemoryAPI` and picks a backend at run time; kv is used here
  MemoryAPI: 'memory_kv.json',
};

const SCHEMA_MAP_KEYS = ['properties', 'patternProperties', 'definitions', '$defs'];
const SCHEMA_KEYS = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'additionalItems'];
const SCHEMA_LIST_KEYS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];

function castGorillaTypes(s: Json): Json {
  if (!isObject(s)) return s;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === 'type' && typeof v === 'string') out[k] = GORILLA_TO_OPENAPI[v] ?? 'string';
    else if (SCHEMA_MAP_KEYS.includes(k) && isObject(v)) out[k] = Object.fromEntries(Object.entries(v).map(([p, x]) => [p, castGorillaTypes(x)]));
    else if (SCHEMA_KEYS.includes(k)) out[k] = Array.isArray(v) ? v.map(castGorillaTypes) : castGorillaTypes(v);
    else if (SCHEMA_LIST_KEYS.includes(k) && Array.isArray(v)) out[k] = v.map(castGorillaTypes);
    else out[k] = v;
  }
  // BFCL: a property without a type becomes a string
  if (isObject(out.properties)) {
    for (const [p, x] of Object.entries(out.properties))
      if (isObject(x) && x.type === undefined && x.anyOf === undefined) out.properties[p] = { ...x, type: 'string' };
  }
  return out;
}

function bfclTool(fn: JsonObject): OpenAITool {
  const params = castGorillaTypes(fn.parameters ?? { type: 'object', properties: {} });
  if (isObject(params)) params.type = 'object';
  const tool: OpenAITool = { type: 'function', function: { name: String(fn.name).replace(/\./g, '_') } };
  if (typeof fn.description === 'string') tool.function.description = fn.description;
  tool.function.parameters = params;
  return tool;
}

function readJsonl(path: string): JsonObject[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim().length > 0)
    .map((l) => JSON.parse(l) as JsonObject);
}

interface Fixture {
  source: string;
  schemas: { id: string; schema: Json }[];
  toolSets: { id: string; tools: OpenAITool[] }[];
}

/** unique tool parameter schemas, keyed by their JSON text */
function addToolSchemas(fx: Fixture, seen: Set<string>, prefix: string, tools: OpenAITool[]): void {
  for (const t of tools) {
    const p = t.function.parameters;
    if (p === undefined) continue;
    const key = JSON.stringify(p);
    if (seen.has(key)) continue;
    seen.add(key);
    fx.schemas.push({ id: `${prefix}/${t.function.name}#${seen.size}`, schema: p });
  }
}

function collectBfcl(dir: string): Fixture {
  const fx: Fixture = {
    source:
      'ShishirPatil/gorilla (Apache-2.0) berkeley-function-call-leaderboard/bfcl_eval/data/BFCL_v4_*.json, unused_datasets/question/*.json, multi_turn_func_doc/*.json; Gorilla types mapped to JSON Schema as BFCL does for OpenAI',
    schemas: [],
    toolSets: [],
  };
  const docDir = join(dir, 'multi_turn_func_doc');
  const classDocs = new Map<string, JsonObject[]>();
  for (const [cls, file] of Object.entries(MULTI_TURN_FUNC_DOC)) classDocs.set(cls, readJsonl(join(docDir, file)));
  const files = [
    ...readdirSync(dir)
      .filter((f) => f.startsWith('BFCL_v4_') && f.endsWith('.json') && f !== 'BFCL_v4_format_sensitivity.json')
      .map((f) => join(dir, f)),
    ...readdirSync(join(dir, 'unused_datasets/question')).map((f) => join(dir, 'unused_datasets/question', f)),
  ];
  const seen = new Set<string>();
  for (const file of files.sort()) {
    const cat = basename(file, '.json').replace(/^BFCL_v4_/, '');
    readJsonl(file).forEach((row, i) => {
      let fns: JsonObject[] = [];
      if (Array.isArray(row.function)) fns = row.function.filter(isObject);
      else if (Array.isArray(row.involved_classes)) {
        const excluded = new Set(Array.isArray(row.excluded_function) ? row.excluded_function.map(String) : []);
        for (const c of row.involved_classes) fns.push(...(classDocs.get(String(c)) ?? []).filter((f) => !excluded.has(String(f.name))));
      }
      if (fns.length === 0) return;
      const tools = fns.map(bfclTool);
      const id = `${cat}/${typeof row.id === 'string' ? row.id : `${cat}_${i}`}`;
      fx.toolSets.push({ id, tools });
      addToolSchemas(fx, seen, cat, tools);
    });
  }
  return fx;
}

function collectMcp(dir: string): Fixture {
  const fx: Fixture = {
    source:
      'github/github-mcp-server (MIT) pkg/github/__toolsnaps__/*.snap: MCP tool definitions (inputSchema); the tool set is every snapshot, i.e. `--toolsets all`',
    schemas: [],
    toolSets: [],
  };
  const tools: OpenAITool[] = [];
  for (const f of readdirSync(dir)
    .filter((x) => x.endsWith('.snap'))
    .sort()) {
    const t = JSON.parse(readFileSync(join(dir, f), 'utf8')) as JsonObject;
    const tool: OpenAITool = { type: 'function', function: { name: String(t.name) } };
    if (typeof t.description === 'string') tool.function.description = t.description;
    tool.function.parameters = t.inputSchema ?? { type: 'object', properties: {} };
    tools.push(tool);
    fx.schemas.push({ id: `tools/${t.name}`, schema: tool.function.parameters });
  }
  fx.toolSets.push({ id: 'toolsets/all', tools });
  return fx;
}

function collectMaskbench(dir: string, prefixes: string[], source: string): Fixture {
  const fx: Fixture = { source, schemas: [], toolSets: [] };
  for (const f of readdirSync(dir).sort()) {
    const m = /^([A-Za-z]+)(?:---|_)(.*)\.json$/.exec(f);
    if (!m || !prefixes.includes(m[1])) continue;
    const doc = JSON.parse(readFileSync(join(dir, f), 'utf8')) as JsonObject;
    fx.schemas.push({ id: `${m[1]}/${m[2]}`, schema: doc.schema });
  }
  return fx;
}

function main(): void {
  const args = process.argv.slice(2);
  const opt = (name: string): string | undefined => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const out = opt('--out');
  if (!out) throw new Error('usage: collect.ts --out DIR [--bfcl DIR] [--mcp DIR] [--maskbench DIR [--synthetic DIR2]]');
  mkdirSync(out, { recursive: true });
  const write = (name: string, fx: Fixture, dir = out): void => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, name), JSON.stringify(fx));
    console.log(`${name}: ${fx.schemas.length} schemas, ${fx.toolSets.length} tool sets`);
  };
  const bfcl = opt('--bfcl');
  if (bfcl) write('bfcl.json', collectBfcl(bfcl));
  const mcp = opt('--mcp');
  if (mcp) write('mcp-github.json', collectMcp(mcp));
  const mb = opt('--maskbench');
  if (mb) {
    write(
      'maskbench-extra.json',
      collectMaskbench(
        mb,
        ['MCPspec', 'JME'],
        'guidance-ai/jsonschemabench maskbench/data: MCPspec---*.json (MCP protocol spec schemas) and JME_*.json (NousResearch/json-mode-eval)',
      ),
    );
    const synth = opt('--synthetic');
    if (synth) {
      write(
        'synthetic.json',
        collectMaskbench(
          mb,
          ['Handwritten', 'Synthesized'],
          'guidance-ai/jsonschemabench maskbench/data: Handwritten---*, Synthesized---* (artificial feature tests)',
        ),
        synth,
      );
    }
  }
}

main();
