#!/usr/bin/env bash
# Re-records every golden file under ../shared/golden (or the REL paths
# given) from one llama.cpp build's llama-server, one server at a time, into
# OUTDIR/REL, with record_golden.py. Run from the project root:
#   tests/model/testdata/record_goldens.sh avx2 /tmp/golden-avx2 [REL.json...]
# BUILD is avx2 or avx512 (KVAULT_LLAMA_BUILD for ../shared/tools/llama.cpp's
# bin/ wrapper). Env: PORT (default 18971), THREADS (default 2).
set -euo pipefail
cd "$(dirname "$0")/../../.."
build=${1:?usage: record_goldens.sh avx2|avx512 OUTDIR [REL.json...]}
out=${2:?usage: record_goldens.sh avx2|avx512 OUTDIR [REL.json...]}
shift 2
shared=../shared
port=${PORT:-18971}
threads=${THREADS:-2}
rels=("$@")
if ((${#rels[@]} == 0)); then
  for f in "$shared"/golden/*.json "$shared"/golden/kquant/*.json \
           "$shared"/golden/arch/*.json; do
    rels+=("${f#"$shared"/golden/}")
  done
fi
pid=
trap '[[ -n "$pid" ]] && kill "$pid" 2>/dev/null; true' EXIT
for rel in "${rels[@]}"; do
  model="$shared/models/${rel%.json}.gguf"
  log="$out/${rel%.json}.server.log"
  mkdir -p "$(dirname "$log")"
  KVAULT_LLAMA_BUILD="$build" "$shared/tools/llama.cpp/bin/llama-server" \
    -m "$model" --host 127.0.0.1 --port "$port" -np 1 -c 256 -t "$threads" \
    > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "$rel: server died, see $log" >&2; exit 1; }
    sleep 0.2
  done
  echo "record_goldens.sh: $build $rel" >&2
  python3 tests/model/testdata/record_golden.py record "$port" \
    "$shared/golden/$rel" -o "$out/$rel"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
done
