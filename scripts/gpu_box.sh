#!/bin/bash
# The validation suite on a GPU box without network (docs/gpu-box.md, which has the call table): build the
# recipe's environment there with `envforge up` from a wheelhouse packed here, verify it (static, gpu,
# drafter), fetch the EAGLE-3 drafter from a hub-compatible server on the box, build it a second time to
# compare digests, and bench the four servers with envforge bench (recipe mode) and, on servers started
# by hand, envforge bench --url and vLLM's own `vllm bench serve` taking turns.
#
#   here:    scripts/gpu_box.sh pack DEST       wheelhouse of the lock (pip download, hashes checked) and
#                                               envforge's tool wheels, split into DEST/c1..cN (< CHUNK_MB
#                                               each), the project in DEST/ef; one device call per chunk
#   device:  bash DEST/cK/recv.sh               keep chunk K in $W (the last one also unpacks the project)
#   device:  bash scripts/gpu_box.sh pre        (with chunk 1) models and the EAGLE-3 head, in the background
#   device:  bash $W/ef/scripts/gpu_box.sh build          unpack, tool venv, drafter fetch, envforge up,
#                                                         verify, second build (digests), servers started
#   device:  bash $W/ef/scripts/gpu_box.sh serve-bench [MODE...]   envforge bench --url and vllm bench
#                                                         serve, A B A B, on the servers build started
#   device:  bash $W/ef/scripts/gpu_box.sh bench          stop those; envforge bench in recipe mode
#   device:  bash $W/ef/scripts/gpu_box.sh client         client benchmarks on the quiet machine
# Environment: RECIPE (vllm-h200), VARIANT (cu130), CHUNK_MB (54), W (/root/envforge-gpu-box: the recipe's
# model and drafter paths name it), HUB_PORT (8090), ROUNDS (2 A B pairs), PER_STREAM (6) and MIN_REQUESTS
# (12): measured requests per level max(PER_STREAM x C, MIN_REQUESTS), LOAD_S (300: serve-bench's wait),
# BENCH_SERVERS (recipe mode; default: those not dead by hand), BENCH_ARGS (more recipe-mode flags), CALL_S (570: a call returns by then),
# ENVPY (the environment's python).
set -uo pipefail
RECIPE=${RECIPE:-vllm-h200}; VARIANT=${VARIANT:-cu130}; W=${W:-/root/envforge-gpu-box}
ENVNAME=$RECIPE-$VARIANT; LOCK=lockfiles/pylock.$ENVNAME.toml
HERE=$(cd "$(dirname "$0")/.." && pwd)
MODES_ALL=(baseline draft-model eagle3 ngram); PORTS=(8001 8002 8003 8004); HUB_PORT=${HUB_PORT:-8090}
say() { echo "== $(date -u +%T) $*"; }
T0=$(date +%s); CALL_S=${CALL_S:-570}  # the tool kills a call at 600 s: long steps get what is left, results are tarred first
left() { echo $(( T0 + CALL_S - $(date +%s) - ${1:-0} )); }
loud() { printf '\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n!!! %s\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n' "$*"; }
EF=($W/tool-venv/bin/python -m envforge)
TOOLPY=$W/tool-venv/bin/python; ENVPY=${ENVPY:-$W/ef/envs/$ENVNAME/bin/python}

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
          "uv", "httpx2", "httpcore2", "truststore", "unidiff",
          # the drafter extra: huggingface_hub 2 (the image has 1.33, on httpx) and what it and httpx2 import
          "huggingface_hub", "anyio", "idna", "h11", "click", "filelock", "fsspec", "pyyaml", "tqdm",
          "typing_extensions"):
    print(f"{n}=={version(n)}")
PY
  env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null "$py" -m pip download -q --no-deps --only-binary=:all: \
      --python-version 3.12 --implementation cp $plat -d "$b/tool" -r "$b/tool-req.txt"
  tar -C "$b" -cf "$b/payload.tar" wh tool
  sha256sum "$b/payload.tar" | cut -c1-64 > "$b/payload.sha256"
  rm -rf "$dest" && mkdir -p "$dest/ef"
  git check-ignore -q "$dest" || echo "warning: $dest is not ignored by git: the device tool would send all of it with every call (echo '/$dest/' >> .git/info/exclude)"
  split -b "${CHUNK_MB:-54}M" -d -a 2 "$b/payload.tar" "$b/part-"
  local parts=("$b"/part-*); local n=${#parts[@]} k=0
  for f in "${parts[@]}"; do
    k=$((k + 1)); mkdir -p "$dest/c$k"; mv "$f" "$dest/c$k/"
    printf '#!/bin/bash\n# chunk %s of %s: keep it in $W (persists while the machine stays warm)\nW=${W:-%s}; d=$(dirname "$0")\nmkdir -p $W/parts && cp $d/part-* $W/parts/ && ls -la $W/parts\n[ -f $d/payload.sha256 ] && cp $d/payload.sha256 $W/parts/\n[ -f $d/../ef/ef.tar.gz ] && mkdir -p $W/ef && tar -xzf $d/../ef/ef.tar.gz -C $W/ef\nexit 0\n' "$k" "$n" "$W" > "$dest/c$k/recv.sh"
  done
  cp "$b/payload.sha256" "$dest/c$n/"
  git archive --format=tar.gz -o "$dest/ef/ef.tar.gz" HEAD
  [ -z "$(git status --porcelain --untracked-files=no)" ] || echo "warning: uncommitted changes: $dest/ef has HEAD, not them"
  du -sh "$dest"/* ; echo "payload sha256 $(cat "$b/payload.sha256"), $n chunks"; rm -rf "$b"
  # what each chunk call sends: the working tree (tracked + untracked not ignored) plus its carried folders
  local tree; tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  for k in $(seq 1 "$n"); do
    local c; c=$(du -cb "$dest/c$k" $([ "$k" = "$n" ] && echo "$dest/ef") | tail -1 | cut -f1)
    echo "call c$k: working tree $((tree / 1048576)) MiB + carried $((c / 1048576)) MiB = $(((tree + c) / 1048576)) MiB (limit 64)"
    [ $((tree + c)) -lt $((63 * 1048576)) ] || echo "warning: call c$k is over 63 MiB: lower CHUNK_MB"
  done
}

pre() {  # device, with the first chunk (GPU otherwise idle): models.py and eagle3.py in the background
  mkdir -p $W/pre $W/m && cp "$HERE"/scripts/gpu_box/models.py "$HERE"/scripts/gpu_box/eagle3.py $W/pre/
  [ -f $W/pre/models.ok ] && [ -f $W/pre/eagle3.ok ] && { echo "models and eagle3 head already made"; return 0; }
  setsid bash -c "echo \$\$ > $W/pre/pid; python3 $W/pre/eagle3.py $W/m/eagle3-src > $W/pre/eagle3.log 2>&1 && touch $W/pre/eagle3.ok;
                  python3 $W/pre/models.py $W/m > $W/pre/models.log 2>&1 && touch $W/pre/models.ok" \
      < /dev/null > /dev/null 2>&1 &
  sleep 1; echo "models.py and eagle3.py started in the background (pid $(cat $W/pre/pid 2>/dev/null); logs in $W/pre)"
}

models() {  # device: wait for pre's background job, or make them now (pre did not run: a fresh machine)
  local i
  for i in $(seq 1 120); do [ -f $W/pre/models.ok ] && [ -f $W/pre/eagle3.ok ] && break
    kill -0 "$(cat $W/pre/pid 2>/dev/null)" 2>/dev/null || break; sleep 1; done  # pre's job still running
  if [ ! -f $W/pre/eagle3.ok ]; then
    say "eagle3 head (pre did not make it)"; python3 "$HERE"/scripts/gpu_box/eagle3.py $W/m/eagle3-src | tee $W/pre/eagle3.log
  fi
  if [ ! -f $W/pre/models.ok ]; then
    say "models (pre did not make them)"; python3 "$HERE"/scripts/gpu_box/models.py $W/m 2>&1 | grep -viE "warn|shards" | tee $W/pre/models.log
  fi
  grep -vE "^target: " $W/pre/models.log | grep -viE "warn|shards"; cat $W/pre/eagle3.log; cp $W/pre/*.log $W/res/
}

tool_venv() {  # device: envforge in its own venv, the image's site-packages visible after its own
  local base; base=$(command -v python3)
  mkdir -p $W/uvw && (cd $W/uvw && python3 -m zipfile -e $W/tool/uv-*.whl . ) && UVBIN=$(ls $W/uvw/uv-*.data/scripts/uv)
  chmod +x "$UVBIN"
  "$UVBIN" venv -q --python "$base" $W/tool-venv
  "$UVBIN" pip install -q --no-config --offline --no-index --no-deps --python $W/tool-venv/bin/python $W/tool/*.whl
  "$base" -c 'import site; print("\n".join(site.getsitepackages()))' \
      > "$(ls -d $W/tool-venv/lib/python3*/site-packages)/_image_site.pth"
}

drafter() {  # device, in $W/ef: the random EAGLE-3 head served by the test hub, fetched by envforge
  local repo pinned got i
  read -r repo pinned < <(python3 -c 'import sys, tomllib; d = tomllib.load(open(sys.argv[1], "rb"))["verify"]["drafter"]
print(d["repo"], d["revision"])' recipes/$RECIPE.toml)
  python3 $W/ef/scripts/gpu_box/hub.py $W/m/eagle3-src "$repo" $HUB_PORT $W/res/hub.sha < /dev/null > $W/res/hub.log 2>&1 &
  echo $! > $W/res/hub.pid  # a child of this call, stopped after verify
  for i in $(seq 1 60); do [ -s $W/res/hub.sha ] && break; sleep 0.5; done
  cat $W/res/hub.log; got=$(cat $W/res/hub.sha 2>/dev/null)
  if [ -z "$got" ]; then loud "the hub did not start (hub.log above): no drafter fetch"; return 1; fi
  if [ "$got" != "$pinned" ]; then
    loud "DRAFTER SHA MISMATCH: eagle3.py on this machine gives commit $got, the recipe pins $pinned; continuing with $got (recipe rewritten here, on the device only)"
    { echo "pinned $pinned"; echo "device $got"; cat $W/pre/eagle3.log; } > $W/res/DRAFTER-SHA-MISMATCH.txt
    sed -i "s/$pinned/$got/g" recipes/$RECIPE.toml; grep -n "$got" recipes/$RECIPE.toml
  else
    echo "drafter commit $got: the recipe's pinned revision"
  fi
  HF_ENDPOINT=http://127.0.0.1:$HUB_PORT "${EF[@]}" drafter fetch "$repo" --revision "$got" --json \
      > $W/res/drafter-fetch.json 2> $W/res/drafter-fetch.err
  echo "drafter fetch rc=$?"; cat $W/res/drafter-fetch.err; ls -la drafters/*/*
  cp drafters/*/"$got"/envforge-drafter.json $W/res/ 2>/dev/null  # the fetch record, beside the fetch's JSON
}

start_servers() {  # device: the four servers by hand (serve.py: the recipe's argv), in their own sessions
  local i args=()
  for i in "${!MODES_ALL[@]}"; do args+=("${MODES_ALL[$i]}:${PORTS[$i]}"); done
  mkdir -p $W/res2; rm -f $W/res2/pids
  $TOOLPY $W/ef/scripts/gpu_box/serve.py start $W/ef $RECIPE $ENVPY $W/res2 "${args[@]}"
}

build() {  # device, in one call
  set +e; mkdir -p "$OUT" $W/res; local t0; t0=$(date +%s)
  say "machine"; nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
  python3 -c "import sys, torch; print(sys.executable, sys.version.split()[0], torch.__version__, torch.version.cuda)"
  say "payload"; local got; got=$(cat $W/parts/part-* | sha256sum | cut -c1-64)
  echo "sha256 $got expected $(cat $W/parts/payload.sha256)"; [ "$got" = "$(cat $W/parts/payload.sha256)" ] || return 3
  cat $W/parts/part-* | tar -x -C $W && ls $W/wh | wc -l
  say "tool venv"; tool_venv; "${EF[@]}" --version
  say "models"; models
  cd $W/ef
  say "drafter: hub on 127.0.0.1:$HUB_PORT, envforge drafter fetch"; drafter
  say "envforge up"; "${EF[@]}" up $RECIPE --variant $VARIANT --offline --find-links $W/wh --python "$(command -v python3)" \
      --json > $W/res/up.json 2> $W/res/up.err; local rc=$?; echo "up rc=$rc"; tail -25 $W/res/up.err
  if [ ! -e envs/$ENVNAME ]; then
    local gen; gen=$(ls -d envs/.generations/$ENVNAME/g*/ 2>/dev/null | tail -1); gen=${gen%/}
    loud "up held the generation back (verify findings above): ${gen##*/} made live by rollback so that the benchmarks run; the findings stand"
    [ -n "$gen" ] && "${EF[@]}" rollback $ENVNAME --to "${gen##*/}" 2>&1 | tee $W/res/HELD-BACK-ROLLED-FORWARD.txt
  fi
  say "servers by hand, all four at once from the live generation (loading while verify runs; serve-bench waits)"
  [ -x $ENVPY ] && start_servers
  say "envforge verify --level static,gpu,drafter (HF_ENDPOINT: the hub)"
  HF_ENDPOINT=http://127.0.0.1:$HUB_PORT "${EF[@]}" verify $ENVNAME --level static,gpu,drafter --json \
      --junit $W/res/verify.junit.xml > $W/res/verify.json 2> $W/res/verify.err
  echo "verify rc=$?"; cat $W/res/verify.err | tail -5; python3 $W/ef/scripts/gpu_box/vtext.py $W/res/verify.json | tee $W/res/verify.txt
  say "envforge verify --level drafter, offline (HF_HUB_OFFLINE=1: the fetched copy, re-hashed)"
  HF_HUB_OFFLINE=1 "${EF[@]}" verify $ENVNAME --level drafter --json > $W/res/verify-drafter-offline.json \
      2> $W/res/verify-drafter-offline.err
  echo "verify rc=$?"; python3 $W/ef/scripts/gpu_box/vtext.py $W/res/verify-drafter-offline.json | tail -2
  kill "$(cat $W/res/hub.pid)" 2>/dev/null
  say "reproducibility: the same lock built in a second copy of the project"
  rm -rf $W/ef2 && mkdir -p $W/ef2 && tar -C $W/ef --exclude=./envs --exclude=./drafters -cf - . | tar -x -C $W/ef2
  (cd $W/ef2 && "${EF[@]}" build $RECIPE --variant $VARIANT --offline --find-links $W/wh --python "$(command -v python3)" \
      --json > $W/res/build2.json 2> $W/res/build2.err); echo "second build rc=$?"; tail -3 $W/res/build2.err
  $TOOLPY $W/ef/scripts/gpu_box/repro.py $W/ef/envs/$ENVNAME $W/ef2/envs/$ENVNAME 2>&1 | tee $W/res/repro.txt
  cp $W/res/up.json $W/res/verify.json $W/res/verify.junit.xml $W/res/drafter-fetch.json $W/res/repro.txt "$OUT"/ 2>/dev/null
  cp envs/.generations/$ENVNAME/g*.log $W/res/ 2>/dev/null; tar -czf "$OUT/build-res.tgz" -C $W res; ls -la "$OUT"
  say "build done in $(( $(date +%s) - t0 )) s"
}

serve_bench() {  # device, after build (same machine): MODE... (default all four) on the servers build started
  set +e; mkdir -p "$OUT" $W/res2; local t0 m; t0=$(date +%s)
  local modes=("$@"); [ ${#modes[@]} -gt 0 ] || modes=("${MODES_ALL[@]}")
  [ -f $W/res2/pids ] || start_servers
  say "waiting for ${modes[*]}"; $TOOLPY $W/ef/scripts/gpu_box/serve.py wait $W/res2 ${LOAD_S:-300} "${modes[@]}"
  for m in "${modes[@]}"; do grep -qx "$m READY" $W/res2/status || loud "$m never answered /health (serve.py wait above): not measured"; done
  [ -d $W/res2/prompts ] || $TOOLPY $W/ef/scripts/gpu_box/prompts.py $W/res2/prompts 1,4,16,32 ${PER_STREAM:-6} ${MIN_REQUESTS:-12}
  cd $W
  for m in "${modes[@]}"; do
    grep -qx "$m READY" $W/res2/status || continue
    local port sp=0; port=$(awk -v m="$m" '$1 == m {p = $3} END {print p}' $W/res2/pids); [ "$m" != baseline ] && sp=1
    say "$m (port $port): envforge bench --url and vllm bench serve, A B x ${ROUNDS:-2}"
    [ "$(left 20)" -gt 30 ] || { loud "$m: no time left in this call (CALL_S=$CALL_S): not measured"; continue; }
    timeout -k 5 "$(left 20)" "$ENVPY" $W/ef/scripts/gpu_box/vbench.py http://127.0.0.1:$port $W/m/target tiny "$m" \
        $W/res2 1,4,16,32 $W/res2/prompts 128 ${ROUNDS:-2} $sp "${EF[@]}" > $W/res2/vbench-$m.log 2>&1
    echo "vbench rc=$? (124: stopped to return within the call)"; grep -E "^(EF|VB) |Traceback|Error" $W/res2/vbench-$m.log | cut -c1-260
  done
  python3 $W/ef/scripts/gpu_box/table.py $W/res2 | tee $W/res2/table.md
  for f in $W/res2/logs/serve-*.log; do echo "-- $f"; grep -E "SpecDecoding metrics|FlashAttention|init engine|ERROR|Traceback" "$f" | cut -c1-300 | tail -12; done > $W/res2/serve-grep.txt
  tar -czf "$OUT/serve-res.tgz" -C $W res2; cp $W/res2/table.md "$OUT/"; ls -la "$OUT"
  say "serve-bench ${modes[*]} done in $(( $(date +%s) - t0 )) s"
}

bench() {  # device: stop the servers started by hand, then envforge bench in recipe mode (it starts each)
  set +e; mkdir -p "$OUT" $W/res3; local t0 s srv=(); t0=$(date +%s)
  [ -f $W/res2/pids ] && { say "stopping the servers started by hand"; $TOOLPY $W/ef/scripts/gpu_box/serve.py stop $W/res2; }
  local servers=${BENCH_SERVERS:-}
  if [ -z "$servers" ] && [ -f $W/res2/status ]; then  # a server that crashes stops recipe mode with no report at all
    for s in "${MODES_ALL[@]}"; do grep -qE "^$s (DIED|TIMEOUT)$" $W/res2/status || servers="$servers $s"; done
    [ "$(echo $servers)" = "${MODES_ALL[*]}" ] || loud "recipe mode without the servers that died or timed out when started by hand: only$servers"
    [ -n "$servers" ] || { loud "no server answered /health when started by hand: recipe mode skipped"; return 1; }
  fi
  for s in $servers; do srv+=(--server "$s"); done
  say "envforge bench (recipe mode: ${servers:-every server of the recipe})"; cd $W/ef
  timeout -k 15 "$(left 25)" "${EF[@]}" bench $ENVNAME --recipe $RECIPE --variant $VARIANT "${srv[@]}" --load-timeout 200 ${BENCH_ARGS:-} \
      --output $W/res3/bench-recipe.json > $W/res3/bench-recipe.txt 2>&1
  echo "bench rc=$? (1: a level failed bench's speculation checks, expected for the random EAGLE-3 head; 124: out of time)"
  grep -vE "^warning: server .* at concurrency|^waiting for" $W/res3/bench-recipe.txt | cut -c1-300 | tail -45
  cp $W/res3/bench-recipe.json $W/res3/bench-recipe.txt $W/res3/bench-recipe.png "$OUT"/ 2>/dev/null
  tar -czf "$OUT/bench-res.tgz" -C $W res3; ls -la "$OUT"
  say "bench done in $(( $(date +%s) - t0 )) s"
}

client() {  # device, nothing else running: which HTTP client, and send lag beside vLLM's client
  set +e; mkdir -p "$OUT" $W/res4; local t0 pin=(); t0=$(date +%s)
  command -v taskset > /dev/null && pin=(taskset -c 8-15)
  cd $W/ef
  say "bench_client_choice.py --concurrency 1,32 --rounds 3 (${pin[*]})"
  if [ -f benchmarks/bench_client_choice.py ]; then
    timeout 150 "${pin[@]}" $TOOLPY benchmarks/bench_client_choice.py --concurrency 1,32 --rounds 3 \
        --json $W/res4/client-choice.json 2>&1 | tee $W/res4/client-choice.txt; echo "rc=${PIPESTATUS[0]}"
  else echo "benchmarks/bench_client_choice.py: not in this checkout"; fi
  say "bench_bench.py (client overhead against bare urllib and aiohttp loops)"
  timeout 120 "${pin[@]}" $TOOLPY benchmarks/bench_bench.py 2>&1 | tee $W/res4/bench-bench.txt; echo "rc=${PIPESTATUS[0]}"
  say "bench_send_lag.py --vllm-python $ENVPY"
  if [ -f benchmarks/bench_send_lag.py ]; then
    timeout 200 "${pin[@]}" $TOOLPY benchmarks/bench_send_lag.py --vllm-python $ENVPY 2>&1 | tee $W/res4/send-lag.txt; echo "rc=${PIPESTATUS[0]}"
  else echo "benchmarks/bench_send_lag.py: not in this checkout"; fi
  tar -czf "$OUT/client-res.tgz" -C $W res4; ls -la "$OUT"
  say "client done in $(( $(date +%s) - t0 )) s"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  pre) pre ;;
  build) build ;;
  serve-bench) shift; serve_bench "$@" ;;
  bench) bench ;;
  client) client ;;
  *) sed -n 2,23p "$0"; exit 2 ;;
esac
