#!/usr/bin/env bash
# On the 2-GPU machine, one call (about 90 s, at most BUDGET=240 s): the physical floor of issue 25 — how much
# NVLink traffic between the two GPUs, moved with the plainest CUDA calls, slows a bf16 8192^3 GEMM loop beside it
# (bench/probes/peer_copy_beside_gemm.cu, built here with nvcc alone: the project is not built). Four runs:
#   main      20 GEMMs a loop, 5 repeats: none, peer, peer-chunks:16, peer2d, local, peer+local, peer2d+local,
#             peer-paced:16:50, peer-paced:16:200 (issue 25's modes and the pieces of the real redistribution)
#   pacing    20 GEMMs a loop, 5 repeats: more pacing (how far the GEMM slowdown falls as the transfer is spread)
#   sustained 100 GEMMs a loop (~160 ms loops, the power cap's steady state), 5 repeats, a few modes
#   pieces    20 GEMMs a loop, 5 repeats: the whole exchange with every copy in pieces (the local copy too), the
#             candidate floor for the real redistribution (added after the 2026-11-26 call, which ran the first three:
#             bench/results/2026-11-26-h100x2-session13; not yet run)
# nvidia-smi samples every GPU's SM clock, power and throttle reasons every 200 ms during each run (smi_RUN.csv); the
# probe's rows end with their wall-clock span (Unix seconds) to line the samples up with the modes.
# A run that would no longer fit in BUDGET is skipped and says so. Everything lands in $OUT/overlap_floor.tgz:
# machine.txt, build.txt, RUN.txt, smi_RUN.csv, clock.txt; bench/results/2026-11-26-h100x2-session13/smi_by_mode.py
# lines the samples up with the rows.
#   OUT=$OUT [RUNS="main pieces"] bash scripts/device/overlap_floor.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
BUDGET=${BUDGET:-240}
ARCHIVE_NAME=overlap_floor
FINAL_OUT=${OUT:-/tmp}
OUT=/tmp/$ARCHIVE_NAME && rm -rf "$OUT" && mkdir -p "$OUT"
trap 'smi_stop; archive_end' EXIT
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,power.default_limit,clocks.max.sm \
    --format=csv; nvidia-smi topo -m; nvidia-smi nvlink -s 2>&1 | head -40; nvcc --version | tail -2
} > "$OUT/machine.txt" 2>&1
# nvidia-smi's timestamps are the machine's local time: the same instant both ways, to line them up
echo "epoch $(date +%s.%N) local $(date '+%Y/%m/%d %H:%M:%S.%N %Z')" > "$OUT/clock.txt"
head -3 "$OUT/machine.txt"
P=/tmp/peer_copy_beside_gemm
nvcc -O3 -arch=sm_90 -o $P bench/probes/peer_copy_beside_gemm.cu -lcublas > "$OUT/build.txt" 2>&1 ||
  { cat "$OUT/build.txt"; exit 1; }
echo "[$(el) s] built"
probe() {  # RUN NEED_S ARGS...: one probe run under smi sampling, unless fewer than NEED_S seconds are left
  local name=$1 need=$2; shift 2
  [[ " ${RUNS:-main pacing sustained pieces} " == *" $name "* ]] || return 0
  if [ "$(left)" -lt "$need" ]; then echo "== skipped $name: $(left) s left"; return; fi
  echo "== $name: peer_copy_beside_gemm $*" | tee "$OUT/$name.txt"
  smi_start "$OUT/smi_$name.csv"
  timeout $(( $(left) - 10 )) $P "$@" 2>&1 | tee -a "$OUT/$name.txt"
  echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/$name.txt"
  smi_stop
  # both GPUs over the whole run (the GEMM loops alone and beside the traffic both fall inside it)
  awk -F', ' '{ gsub(/ MHz| W/, ""); print $2, $3, $5, $7 }' "$OUT/smi_$name.csv" | sort -k1,1n -k2,2n | awk '
    { c[$1, ++k[$1]] = $2; p[$1] += $3; t[$1 " " $4]++ }
    END { for (g = 0; g < 2; g++) if (k[g]) printf "GPU %d: SM clock min %d median %d max %d MHz, mean power %.0f W (%d samples)\n",
            g, c[g, 1], c[g, int((k[g] + 1) / 2)], c[g, k[g]], p[g] / k[g], k[g]
          for (x in t) printf "  GPU throttle %s: %d samples\n", x, t[x] }' | tee -a "$OUT/$name.txt"
  echo "[$(el) s] $name"
}
probe main 60 8192 20 5 none,peer,peer-chunks:16,peer2d,local,peer+local,peer2d+local,peer-paced:16:50,peer-paced:16:200
probe pacing 50 8192 20 5 none,peer-chunks:64,peer-paced:64:20,peer-paced:16:400,peer-paced:4:1000,peer2d-paced:16:200,peer2d-paced:64:50
probe sustained 60 8192 100 5 none,peer,peer2d+local,peer-paced:16:200,peer-paced:64:50
probe pieces 40 8192 20 5 none,local:16,peer2d:16,peer2d+local:16,peer+local:16,peer2d+local:64,peer2d+local:16:50
