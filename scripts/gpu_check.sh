#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU, vLLM and this project installed (`pip install -e .`:
# vLLM loads the plugin through its entry point): runs the plugin's end-to-end stories (fits,
# too_long = skipped for length under V1, crossing, mixed, grammar) for each drafting method
# (draft_model, eagle, eagle3, mtp), then ngram, on the GPU paths -- Model Runner V2 and async
# scheduling, which a CPU cannot run -- and compares the vLLM-compatible numbers of the events
# with vLLM's own counters, story by story, and step by step through the audit (the view vllm_audit:
# vLLM's own counters in every step event). Prints a PASS/FAIL table; exit 1 on any FAIL. Sync modes turn async scheduling off explicitly (a GPU turns it on by default);
# async modes run the ngram scenario with `ngram_gpu` (vLLM refuses async with the CPU proposer).
#
#   scripts/gpu_check.sh [WORKDIR [MODE...]]    MODE: v1-sync v2-sync v1-async v2-async (default: all)
#
# On a CPU only v1-sync can run (V2 needs Triton, async needs a GPU).
# Not yet verified on a GPU (see docs/plugin.md, "Supported versions").
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
shift $(($# > 0 ? 1 : 0))
python=${PYTHON:-python3}
declare -A modes=([v1-sync]="0:" [v2-sync]="1:" [v1-async]="0:--async-scheduling" [v2-async]="1:--async-scheduling")
selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=(v1-sync v2-sync v1-async v2-async)
status=0
for name in "${selected[@]}"; do
  [ -n "${modes[$name]:-}" ] || { echo "unknown mode $name (v1-sync v2-sync v1-async v2-async)"; exit 2; }
  IFS=: read -r v2 flag <<<"${modes[$name]}"
  dir="$work/$name"; rm -rf "$dir"; mkdir -p "$dir"
  if ! VLLM_USE_V2_MODEL_RUNNER=$v2 SPECMETRICS_SINK="file://$dir/log" VLLM_ENABLE_V1_MULTIPROCESSING=0 \
       "$python" -m specmetrics.vllm_scenarios --out "$dir/scenarios.json" $flag >"$dir/vllm.log" 2>&1; then
    echo "$name  FAIL  vLLM run failed, see $dir/vllm.log"; status=1; continue
  fi
  if ! "$python" -m specmetrics.cli ingest --source "file://$dir/log" --out "$dir/data" --once --quiet \
       >"$dir/ingest.log" 2>&1; then
    echo "$name  FAIL  ingest failed, see $dir/ingest.log"; status=1; continue
  fi
  "$python" - "$dir" "$name" <<'PY' || status=1
import json, sys
from pathlib import Path
from specmetrics.queries import connect
from specmetrics.windows import reproduces, window_metrics
root, name = Path(sys.argv[1]), sys.argv[2]
con = connect(root / "data")
failed = False
for scenario in json.loads((root / "scenarios.json").read_text()):
    got, vllm = window_metrics(con, scenario["started"], scenario["finished"], 3), scenario["vllm"]
    ok = reproduces(got, vllm)
    failed |= not ok
    story = f"{scenario['engine']}/{scenario['name']}"
    print(f"{name:9} {story:22} {'PASS' if ok else 'FAIL'}  events={got}  vllm={vllm}")
# The audit: vLLM's own counters of every step against the events' (the plugin checks itself).
for row in con.execute("SELECT method, vllm_version, steps_compared, steps_differing, first_differing_step "
                       "FROM vllm_audit ORDER BY method").fetchall():
    method, version, compared, differing, first = row
    ok = compared > 0 and differing == 0
    failed |= not ok
    print(f"{name:9} {'audit ' + method:22} {'PASS' if ok else 'FAIL'}  vLLM {version}: {compared} steps compared, "
          f"{differing} differ" + (f" (first at step {first}; see the view vllm_audit_steps)" if differing else ""))
sys.exit(1 if failed else 0)
PY
done
exit $status
