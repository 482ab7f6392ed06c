#!/bin/bash
# The validation suite on a GPU box without network (docs/gpu-box.md): build the recipe's environment
# there with `envforge up` from a wheelhouse packed here, verify it (static, gpu) and bench plain and
# speculative vLLM servers with envforge bench and vLLM's own `vllm bench serve`.
#
#   here:    scripts/gpu_box.sh pack DEST       wheelhouse of the lock (pip download, hashes checked) and
#                                               envforge's tool wheels, split into DEST/c1..cN (< CHUNK_MB
#                                               each), the project in DEST/ef; one device call per chunk
#   device:  bash DEST/cK/recv.sh               keep chunk K in $W (the last one also unpacks the project)
#   device:  bash $W/ef/scripts/gpu_box.sh build        unpack, tool venv, models, envforge up, verify,
#                                                       envforge bench (recipe mode)      -> $OUT
#   device:  bash $W/ef/scripts/gpu_box.sh serve-bench  servers by hand; envforge bench --url and
#                                                       vllm bench serve on each          -> $OUT
# Environment: RECIPE (vllm-h200), VARIANT (cu130), CHUNK_MB (54), W (/root/envforge-gpu-box: the
# recipe's model paths name it), MODES (servers for serve-bench), BENCH_SERVERS (recipe mode).
set -uo pipefail
RECIPE=${RECIPE:-vllm-h200}; VARIANT=${VARIANT:-cu130}; W=${W:-/root/envforge-gpu-box}
ENVNAME=$RECIPE-$VARIANT; LOCK=lockfiles/pylock.$ENVNAME.toml
HERE=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "== $(date -u +%T) $*"; }

pack() {  # here, with network
  set -e
  local dest=${1:?DEST}; local b; b=$(mktemp -d "${TMPDIR:-/tmp}/gpu-box.XXXX")
  cd "$HERE"
  local py=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}  # envforge's own venv (uv is in it)
  local uv=${UV:-$(dirname "$py")/uv}
  # the lock's wheels, each with its sha256 from the lock (pip refuses a file whose hash differs)
  "$py" - "$LOCK" > "$b/lock-req.txt" <<'PY'
import sys, tomllib
for p in tomllib.load(open(sys.argv[1], "rb"))["packages"]:
    hashes = " ".join(f"--hash=sha256:{w['hashes']['sha256']}" for w in p.get("wheels", []))
    print(f"{p['name']}=={p['version']} {hashes}")
PY
  local plat=""; for p in 2_35 2_34 2_31 2_28 2_27 2_26 2_17 2_5; do plat="$plat --platform manylinux_${p}_x86_64"; done
  plat="$plat --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any"
  env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null "$py" -m pip download -q --no-deps --require-hashes \
      --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none $plat \
      -d "$b/wh" -r "$b/lock-req.txt"
  # envforge itself and what it needs that the device image lacks (versions: this checkout's venv)
  "$uv" build -q --wheel -o "$b/tool" .
  "$py" - > "$b/tool-req.txt" <<'PY'
from importlib.metadata import version
for n in ("packaging", "libcst", "tomlkit", "rtoml", "gitpython", "gitdb", "smmap", "argcomplete", "pyflakes",
          "uv", "httpx2", "httpcore2", "truststore"):
    print(f"{n}=={version(n)}")
PY
  env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null "$py" -m pip download -q --no-deps --only-binary=:all: \
      --python-version 3.12 --implementation cp $plat -d "$b/tool" -r "$b/tool-req.txt"
  tar -C "$b" -cf "$b/payload.tar" wh tool
  sha256sum "$b/payload.tar" | cut -c1-64 > "$b/payload.sha256"
  rm -rf "$dest" && mkdir -p "$dest/ef"
  split -b "${CHUNK_MB:-54}M" -d -a 2 "$b/payload.tar" "$b/part-"
  local parts=("$b"/part-*); local n=${#parts[@]} k=0
  for f in "${parts[@]}"; do
    k=$((k + 1)); mkdir -p "$dest/c$k"; mv "$f" "$dest/c$k/"
    printf '#!/bin/bash\n# chunk %s of %s: keep it in $W (persists while the machine stays warm)\nW=${W:-%s}; d=$(dirname "$0")\nmkdir -p $W/parts && cp $d/part-* $W/parts/ && ls -la $W/parts\n[ -f $d/payload.sha256 ] && cp $d/payload.sha256 $W/parts/\n[ -f $d/../ef/ef.tar.gz ] && mkdir -p $W/ef && tar -xzf $d/../ef/ef.tar.gz -C $W/ef\nexit 0\n' "$k" "$n" "$W" > "$dest/c$k/recv.sh"
  done
  cp "$b/payload.sha256" "$dest/c$n/"
  git archive --format=tar.gz -o "$dest/ef/ef.tar.gz" HEAD
  du -sh "$dest"/* ; echo "payload sha256 $(cat "$b/payload.sha256"), $n chunks"; rm -rf "$b"
}

tool_venv() {  # device: envforge in its own venv, the image's site-packages visible after its own
  local base; base=$(command -v python3)
  mkdir -p $W/uvw && (cd $W/uvw && python3 -m zipfile -e $W/tool/uv-*.whl . ) && UVBIN=$(ls $W/uvw/uv-*.data/scripts/uv)
  chmod +x "$UVBIN"
  "$UVBIN" venv -q --python "$base" $W/tool-venv
  "$UVBIN" pip install -q --no-config --offline --no-index --no-deps --python $W/tool-venv/bin/python $W/tool/*.whl
  "$base" -c 'import site; print("\n".join(site.getsitepackages()))' \
      > "$(ls -d $W/tool-venv/lib/python3*/site-packages)/_image_site.pth"
  EF=($W/tool-venv/bin/python -m envforge)
}

build() {  # device, in one call
  set +e; mkdir -p "$OUT" $W/res; local t0; t0=$(date +%s)
  say "machine"; nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
  python3 -c "import sys, torch; print(sys.executable, sys.version.split()[0], torch.__version__, torch.version.cuda)"
  say "payload"; local got; got=$(cat $W/parts/part-* | sha256sum | cut -c1-64)
  echo "sha256 $got expected $(cat $W/parts/payload.sha256)"; [ "$got" = "$(cat $W/parts/payload.sha256)" ] || return 3
  cat $W/parts/part-* | tar -x -C $W && ls $W/wh | wc -l
  say "tool venv"; tool_venv; "${EF[@]}" --version
  say "models"; [ -d $W/m/eagle3 ] || python3 $W/ef/scripts/gpu_box/models.py $W/m 2>&1 | grep -viE "warn|shards"
  cd $W/ef
  say "envforge up"; "${EF[@]}" up $RECIPE --variant $VARIANT --offline --find-links $W/wh --python "$(command -v python3)" \
      --json > $W/res/up.json 2> $W/res/up.err; echo "up rc=$?"; tail -25 $W/res/up.err
  say "envforge verify --level static,gpu"
  "${EF[@]}" verify $ENVNAME --level static,gpu --json --junit $W/res/verify.junit.xml > $W/res/verify.json 2> $W/res/verify.err
  echo "verify rc=$?"; "${EF[@]}" verify $ENVNAME --level static,gpu > $W/res/verify.txt 2>&1; tail -40 $W/res/verify.txt
  say "envforge bench (recipe mode: ${BENCH_SERVERS:-baseline draft-model})"
  local srv=(); for s in ${BENCH_SERVERS:-baseline draft-model}; do srv+=(--server "$s"); done
  "${EF[@]}" bench $ENVNAME --recipe $RECIPE --variant $VARIANT "${srv[@]}" --output $W/res/bench-recipe.json > $W/res/bench-recipe.txt 2>&1
  echo "bench rc=$?"; grep -vE "^warning: server .* at concurrency" $W/res/bench-recipe.txt | cut -c1-300 | tail -30
  cp $W/res/up.json $W/res/verify.json $W/res/bench-recipe.json $W/res/verify.txt "$OUT"/ 2>/dev/null
  cp $W/ef/envs/.generations/$ENVNAME/g*.log $W/res/ 2>/dev/null; tar -czf "$OUT/build-res.tgz" -C $W res; ls -la "$OUT"
  say "build done in $(( $(date +%s) - t0 )) s"
}

serve_bench() {  # device, after build (same machine)
  set +e; mkdir -p "$OUT" $W/res2; local t0; t0=$(date +%s); tool_venv >/dev/null 2>&1 || true
  [ -x $W/tool-venv/bin/python ] && EF=($W/tool-venv/bin/python -m envforge)
  local envpy=$W/ef/envs/$ENVNAME/bin/python port=8001 modes=(${MODES:-baseline draft-model}) args=()
  for m in "${modes[@]}"; do args+=("$m:$port"); port=$((port + 1)); done
  rm -f $W/res2/pids
  say "servers ${args[*]}"
  $W/tool-venv/bin/python $W/ef/scripts/gpu_box/serve.py $W/ef $RECIPE "$envpy" $W/res2 ${LOAD_S:-300} "${args[@]}"
  port=8001
  for m in "${modes[@]}"; do
    local u=http://127.0.0.1:$port sp=(); [ "$m" != baseline ] && sp=(--speculative); port=$((port + 1))
    say "$m: envforge bench --url"
    "${EF[@]}" bench --url $u --api vllm --model tiny --name $m "${sp[@]}" --concurrency 1,4,16,32 --repeats 3 \
        --max-new-tokens 128 --output $W/res2/ef-$m.json --no-plot > $W/res2/ef-$m.txt 2>&1
    echo "envforge rc=$?"; grep -E "^(server|$m ) " $W/res2/ef-$m.txt
    say "$m: vllm bench serve"
    "$envpy" $W/ef/scripts/gpu_box/vbench.py $u $W/m/target tiny $m $W/res2 1,4,16,32 \
        $W/ef/src/envforge/data/prompts/smoke.jsonl 128 > $W/res2/vb-$m.log 2>&1
    echo "vbench rc=$?"; grep -E "^VB|Traceback|Error" $W/res2/vb-$m.log | cut -c1-300 | head -8
  done
  python3 $W/ef/scripts/gpu_box/table.py $W/res2 | tee $W/res2/table.md
  for f in $W/res2/logs/serve-*.log; do grep -E "SpecDecoding metrics|FlashAttention|init engine|ERROR" "$f" | cut -c1-300 | tail -12; done > $W/res2/serve-grep.txt
  tar -czf "$OUT/serve-res.tgz" -C $W res2; cp $W/res2/table.md "$OUT/" ; ls -la "$OUT"
  say "serve-bench done in $(( $(date +%s) - t0 )) s"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  build) build ;;
  serve-bench) serve_bench ;;
  *) sed -n 2,16p "$0"; exit 2 ;;
esac
