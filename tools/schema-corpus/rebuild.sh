#!/usr/bin/env bash
# Rebuilds the statistics and test/fixtures/serve/schema-corpus.json from checkouts of the source corpora.
#
#   tools/schema-corpus/rebuild.sh CORPORA_DIR [WORK_DIR]
#
# CORPORA_DIR holds checkouts (any commit; the README's numbers are from the commits named there) of
#   jsonschemabench/     https://github.com/guidance-ai/jsonschemabench   (data/, maskbench/data/)
#   gorilla/             https://github.com/ShishirPatil/gorilla          (berkeley-function-call-leaderboard/bfcl_eval/data/)
#   github-mcp-server/   https://github.com/github/github-mcp-server      (pkg/github/__toolsnaps__/)
#   json-schema-corpus/  https://github.com/sdbs-uni-p/json-schema-corpus (json_schema_corpus/)
# WORK_DIR (default: a temporary folder) receives the normalised tool corpora and the reports.
set -euo pipefail
C=${1:?usage: rebuild.sh CORPORA_DIR [WORK_DIR]}
W=${2:-$(mktemp -d)}
cd "$(dirname "$0")/../.."
LIMITS=depth=48,bytes=2097152,maxEnum=8192,totalEnum=65536,maxPattern=8192,maxPatternKey=8192,properties=16384,tools=128

npx tsx tools/schema-corpus/collect.ts --out "$W/norm" --synthetic "$W/synthetic" \
  --bfcl "$C/gorilla/berkeley-function-call-leaderboard/bfcl_eval/data" \
  --mcp "$C/github-mcp-server/pkg/github/__toolsnaps__" \
  --maskbench "$C/jsonschemabench/maskbench/data"

IN=(jsonschemabench="$C/jsonschemabench/data" bfcl="$W/norm/bfcl.json" github-mcp-server="$W/norm/mcp-github.json"
  maskbench="$W/norm/maskbench-extra.json" json-schema-corpus="$C/json-schema-corpus/json_schema_corpus")

npx tsx tools/schema-corpus/stats.ts --top 5 --no-ajv --by-source --limits "$LIMITS" "${IN[@]}" > "$W/per-corpus.md"
npx tsx tools/schema-corpus/stats.ts --top 5 --dedupe --limits "$LIMITS" --json "$W/distinct.json" "${IN[@]}" > "$W/distinct.md"
npx tsx tools/schema-corpus/stats.ts --top 5 --dedupe --limits "$LIMITS" "${IN[@]:0:4}" > "$W/curated.md"
npx tsx tools/schema-corpus/stats.ts --top 5 --limits "$LIMITS" synthetic="$W/synthetic" > "$W/synthetic.md"

npx tsx tools/schema-corpus/build-fixture.ts --out test/fixtures/serve/schema-corpus.json --sample 100 --cap 24576 \
  --source-note "jsonschemabench=guidance-ai/jsonschemabench@ba103c73756198dd9b149ddc7db7867da7a077f6 data/<Subset>/<name>.json (JSONSchemaBench, arXiv 2501.10868; the repository has no LICENSE file; its schemas come from sdbs-uni-p/json-schema-corpus (Apache-2.0), glaiveai/glaive-function-calling-v2, instrumenta/kubernetes-json-schema, SchemaStore, Snowplow and the Washington Post ANS)" \
  --source-note "bfcl=ShishirPatil/gorilla@6ea57973c7a6097fd7c5915698c54c17c5b1b6c8 (Apache-2.0) berkeley-function-call-leaderboard/bfcl_eval/data/BFCL_v4_<category>.json (+ unused_datasets/question/, multi_turn_func_doc/); Gorilla types (dict, float, tuple, ...) mapped to JSON Schema as BFCL's GORILLA_TO_OPENAPI does; one tool set per test entry" \
  --source-note "github-mcp-server=github/github-mcp-server@64a49f34d076b6f5917dae1424521d43c7bcae84 (MIT) pkg/github/__toolsnaps__/<tool>.snap inputSchema; toolsets/all is every tool (--toolsets all)" \
  --source-note "maskbench=guidance-ai/jsonschemabench@ba103c73756198dd9b149ddc7db7867da7a077f6 maskbench/data/MCPspec---<name>.json (MCP protocol schemas) and JME_<n>.json (NousResearch/json-mode-eval), field .schema" \
  --source-note "json-schema-corpus=sdbs-uni-p/json-schema-corpus@79f808b10c9e3269ea57f5c7c64fd663eadf2703 (Apache-2.0) json_schema_corpus/pp_<n>.json: 82k schemas from public GitHub repositories (BigQuery, July 2020), uncurated" \
  "${IN[@]}"
echo "reports in $W"
