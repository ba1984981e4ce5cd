#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU and vLLM installed: runs the plugin's end-to-end
# stories (fits, too_long, crossing, grammar, ngram) on the GPU paths -- Model Runner V2 and
# async scheduling, which a CPU cannot run -- and compares the vLLM-compatible numbers of the
# events with vLLM's own counters, story by story. Prints a PASS/FAIL table; exit 1 on any FAIL.
#
#   scripts/gpu_check.sh [WORKDIR]
#
# Not yet verified on a GPU (see README, "Supported versions").
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
python=${PYTHON:-python3}
status=0
for mode in "v1-sync:0:" "v2-sync:1:" "v1-async:0:--async-scheduling" "v2-async:1:--async-scheduling"; do
  IFS=: read -r name v2 flag <<<"$mode"
  dir="$work/$name"; rm -rf "$dir"; mkdir -p "$dir"
  if ! VLLM_USE_V2_MODEL_RUNNER=$v2 SPECMETRICS_SINK="file://$dir/log" VLLM_ENABLE_V1_MULTIPROCESSING=0 \
       "$python" -m specmetrics.vllm_scenarios --out "$dir/stories.json" $flag >"$dir/vllm.log" 2>&1; then
    echo "$name  FAIL  vLLM run failed, see $dir/vllm.log"; status=1; continue
  fi
  "$python" -m specmetrics.cli ingest --source "file://$dir/log" --out "$dir/data" --once >/dev/null 2>&1
  "$python" - "$dir" "$name" <<'PY' || status=1
import json, sys
from pathlib import Path
from queries import connect
from specmetrics.windows import reproduces, window_metrics
root, name = Path(sys.argv[1]), sys.argv[2]
con = connect(root / "data")
failed = False
for story in json.loads((root / "stories.json").read_text()):
    got, vllm = window_metrics(con, story["started"], story["finished"], 3), story["vllm"]
    ok = reproduces(got, vllm)
    failed |= not ok
    print(f"{name:9} {story['name']:9} {'PASS' if ok else 'FAIL'}  events={got}  vllm={vllm}")
sys.exit(1 if failed else 0)
PY
done
exit $status
