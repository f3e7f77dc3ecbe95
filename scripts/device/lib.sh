# Shared by the device scripts: source it from the repository root, then call device_setup.

# device_setup: NCCL settings, $OUT (default /tmp), the build (build-device/), $R (the CLI), $T (the GPU test binary)
# and $OUT/machine.txt. Returns non-zero when the build fails.
device_setup() {
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  export RESHARD_CLI="$PWD/build-device/tools/reshard"
  OUT=${OUT:-/tmp}
  R=build-device/tools/reshard
  T=build-device/tests/executor_gpu_tests
  bash scripts/device/build.sh || return 1
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
    python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  } > "$OUT/machine.txt" 2>&1
}

# bench LABEL FLAGS...: one verified `reshard run` on NCCL ($P: optional profile); appends "LABEL | result row | verification" to
# $OUT/bench.txt and any --trace lines to $OUT/traces.txt.
bench() {
  local label=$1; shift
  timeout 120 $R run --backend nccl --iters 30 ${P:+--profile $P} "$@" > "$OUT/run.txt" 2>&1
  echo "$label | $(grep -E '^  ' "$OUT/run.txt" | tail -1) | $(grep -E 'verified' "$OUT/run.txt")" | tee -a "$OUT/bench.txt"
  if grep -qE "^# step" "$OUT/run.txt"; then
    grep -E "^# step" "$OUT/run.txt" >> "$OUT/traces.txt"
    echo "  ^ $label" >> "$OUT/traces.txt"
  fi
}
# sweep_mesh2 LABEL [PROFILE]: `reshard bench` on mesh (2), 256 KiB-256 MiB f32, every pair of R/S0/S1, every strategy
# and transport (auto's choice marked, every run verified), planned with PROFILE (default: the built-in profile);
# writes $OUT/sweep_LABEL.csv and .log and prints its exit status and verification line.
sweep_mesh2() {
  local label=$1 profile=${2:-}
  timeout 100 $R bench --backend nccl --meshes 2 --sizes 256KiB,4MiB,64MiB,256MiB --dtypes f32 --iters 30 --warmup 5 \
    ${profile:+--profile "$profile"} --csv "$OUT/sweep_$label.csv" > "$OUT/sweep_$label.log" 2>&1
  echo "[$(el) s] sweep $label: exit $?"; grep -E "wrong" "$OUT/sweep_$label.log" | tail -1
}
# sanitize BINARY FILTER: compute-sanitizer memcheck, racecheck and synccheck ($TOOLS) over the light GPU suite, on reshard's kernels
# (API errors inside NCCL, which probes kernel images and peer access and handles the errors itself, not reported).
sanitize() {
  local bin=$1 filter=$2
  compute-sanitizer --version | head -2 > "$OUT/sanitizer.log"
  for tool in ${TOOLS:-memcheck racecheck synccheck}; do
    echo "== $tool" >> "$OUT/sanitizer.log"
    RESHARD_GPU_TESTS_LIGHT=1 timeout ${SANITIZE_S:-150} compute-sanitizer --tool $tool --kernel-name kns=reshard \
      --report-api-errors no --error-exitcode 9 "$bin" --gtest_filter="$filter" >> "$OUT/sanitizer.log" 2>&1
    echo "exit $?" >> "$OUT/sanitizer.log"
  done
  grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|exit |GPU SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log"
}

# device_begin: the clock for el (seconds since), the call's budget for left (BUDGET seconds, default 575) and
# device_setup into $OUT/build.txt (its tail when it fails).
device_begin() {
  t0=$(date +%s)
  OUT=${OUT:-/tmp}
  BUDGET=${BUDGET:-575}
  device_setup > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; return 1; }
}
el() { echo $(( $(date +%s) - t0 )); }

# archive_begin NAME: files of this call go to a fresh /tmp/NAME ($OUT) and, at archive_end, into one archive
# $FINAL_OUT/NAME.tgz (the device tool brings back a few files only); then device_begin and the "built" line.
archive_begin() {
  ARCHIVE_NAME=$1
  FINAL_OUT=${OUT:-/tmp}
  OUT=/tmp/$ARCHIVE_NAME && rm -rf "$OUT" && mkdir -p "$OUT"
  device_begin || return 1
  echo "[$(el) s] built"
}
archive_end() { echo "[$(el) s] done"; tar -C "$OUT" -czf "$FINAL_OUT/$ARCHIVE_NAME.tgz" .; }
left() { echo $(( BUDGET - $(el) )); }

# smi_start FILE / smi_stop: sample every GPU's SM clock, power draw and throttle reasons every 200 ms into FILE (CSV)
# while something runs: a slowdown that follows the clock (power or thermal capping) is not contention for SMs.
smi_start() {
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader -lms 200 > "$1" 2>&1 &
  SMI_PID=$!
}
smi_stop() { [ -n "${SMI_PID:-}" ] && kill "$SMI_PID" 2> /dev/null; wait "$SMI_PID" 2> /dev/null; SMI_PID=; }

# n_processes FILE N RUN-FLAGS...: one `reshard run --mesh N` as N processes (one per GPU, file rendezvous, one job
# token for all); appends rank 0's result row (and any error), tagged with the flags, to FILE.
n_processes() {
  local file=$1 n=$2; shift 2
  local rv="$OUT/rv_$RANDOM" token="job$RANDOM$$"
  for ((rk = 0; rk < n; rk++)); do
    RESHARD_RENDEZVOUS_TOKEN=$token RANK=$rk LOCAL_RANK=$rk WORLD_SIZE=$n timeout 60 $R run --mesh $n "$@" \
      --rendezvous file:$rv > "$OUT/mp_$rk.txt" 2>&1 &
  done
  wait; rm -f "$rv"
  grep -hE "^  $n |error" "$OUT"/mp_*.txt | sed "s|\$|   [$*]|" >> "$file"
  rm -f "$OUT"/mp_*.txt
}
# host_processes FILE N COMMAND-FLAGS...: one `reshard COMMAND-FLAGS` as N processes, HOST_RANKS consecutive ranks
# (default 1) on each "host" for NCCL (NCCL_HOSTID: between hosts NCCL takes its network path, sockets on the loopback;
# within one it takes NVLink), all on GPU 0 (NCCL lets ranks of different hosts share a GPU) or, with OWN_GPUS=1, rank k
# on GPU k; file rendezvous, one job token; appends every rank's last result row (and any error) to FILE (HP_KEEP=1:
# each rank's whole output stays in $OUT/hp_RANK.txt).
host_processes() {
  local file=$1 n=$2; shift 2
  local rv="$OUT/rv_$RANDOM" token="job$RANDOM$$"
  for ((rk = 0; rk < n; rk++)); do
    NCCL_HOSTID=host$((rk / ${HOST_RANKS:-1})) NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 RESHARD_RENDEZVOUS_TOKEN=$token \
      RANK=$rk LOCAL_RANK=$([[ ${OWN_GPUS:-0} == 1 ]] && echo $rk || echo 0) WORLD_SIZE=$n timeout ${HP_TIMEOUT:-120} \
      $R "$@" --rendezvous file:$rv > "$OUT/hp_$rk.txt" 2>&1 &
  done
  wait; rm -f "$rv"
  for ((rk = 0; rk < n; rk++)); do
    grep -hE "^  [0-9]|verified|error|wrote|calibrated|inter_node" "$OUT/hp_$rk.txt" | sed "s|^|rank $rk: |; s|\$|   [$*]|"
  done >> "$file"
  [[ ${HP_KEEP:-0} == 1 ]] || rm -f "$OUT"/hp_*.txt
}
# two_processes FILE RUN-FLAGS...: n_processes on 2 GPUs.
two_processes() {
  local file=$1; shift
  n_processes "$file" 2 "$@"
}
