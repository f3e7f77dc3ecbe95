#!/usr/bin/env bash
# On the 4-GPU machine, one call: two nodes of two GPUs emulated on one host, ranks 0,1 and 2,3. EMULATION picks how:
#   sockets (default): NCCL forced onto its network path for every pair (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, sockets on
#     the loopback), so every byte NCCL carries, a node's own too, travels as between nodes; one process runs every rank;
#   hostid: one process per GPU, each node's two an NCCL host of their own (NCCL_HOSTID, lib.sh host_processes): NCCL
#     takes NVLink within a node and the sockets between nodes, as on a cluster (PyTorch's runs too).
# reshard plans for 2 ranks per node with a profile calibrated under the emulation (`reshard calibrate`: the link within
# a node as NCCL takes it there, the link between nodes between two processes of different nodes), so it carries a
# node's own traffic one-sided over NVLink (mixed steps, one-sided node stages of a hierarchical all_reduce) and sends
# into each node once what several of its ranks need (relayed steps; docs/nodes.md). Per case at 256 MiB and 1 GiB f32:
# reshard's plan (auto) and the flat NCCL plan (--transport nccl --relay never, no hierarchical all_reduce), each run
# from its plan file, verified, with the bytes between nodes (measured: the loopback interface's bytes sent during the
# run over its 17 calls, NCCL's setup included, under sockets a node's own NCCL traffic too; counted from the ranks'
# programs and from the plan) and the least the layouts need; the link: a 1 GiB transfer from GPU 0 to GPU 2 under the
# same settings (bound = least bytes into a node / its rate). Then reshard.torch against DTensor.redistribute under the
# same NCCL settings (python/bench/bench_torch.py, median of 5 calls after 2). Files under $OUT: two_nodes.txt (the
# table), calibrate.txt, emulated.json, run_*.txt, link.txt, bench_torch/.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
EMULATION=${EMULATION:-sockets}
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
# Bytes sent on the loopback interface so far: every byte NCCL carries between nodes goes through it (and little else).
lo_tx() { awk '$1 == "lo:" { print $10 }' /proc/net/dev; }
# run_reshard FILE RUN-FLAGS...: one verified `reshard run` of the 4 ranks, its output (rank 0's) in FILE.
run_reshard() {
  local file=$1; shift
  if [[ $EMULATION == sockets ]]; then
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 150 $R run --backend nccl "$@" > "$file" 2>&1
  else
    HOST_RANKS=2 OWN_GPUS=1 HP_TIMEOUT=150 HP_KEEP=1 host_processes /dev/null 4 run "$@"
    mv "$OUT/hp_0.txt" "$file"; rm -f "$OUT"/hp_*.txt
  fi
}
CASES=("--mesh 4 --from S0 --to R" "--mesh 2x2 --from S0,S1 --to S1,S0" "--mesh 2x2 --from S0,S0 --to S1,S1"
       "--mesh 4 --from P --to R" "--from-mesh 2 --from-ranks 0,1 --to-mesh 2 --to-ranks 2,3 --world-size 4 --from S0 --to R")
SHAPES=("8192x8192" "16384x16384")  # 256 MiB, 1 GiB of f32
# The emulated machine's profile, every plan below made with it: NCCL within a node as it runs there (on the sockets
# under `sockets`), the link between nodes between two processes of different nodes, the one-sided transport as measured.
[[ $EMULATION == sockets ]] && export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
timeout 200 $R calibrate --nccl-link intra_node --sizes 1MiB,16MiB,256MiB --iters 5 --no-mapping \
  --out "$OUT/emulated_intra.json" > "$OUT/calibrate.txt" 2>&1
unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE
OWN_GPUS=1 HP_TIMEOUT=200 host_processes "$OUT/calibrate.txt" 2 calibrate --nccl-link inter_node \
  --sizes 1MiB,16MiB,256MiB --iters 5 --base "$OUT/emulated_intra.json" --out "$OUT/emulated.json"
grep -E "p2p|all_gather|nvlink|calibrated|error" "$OUT/calibrate.txt" | head -10
P="$OUT/emulated.json"
echo "[$(el) s] calibrated ($EMULATION)"
# The link between "nodes": one 1 GiB p2p exchange from GPU 0's node to the other, flat NCCL, as reshard runs it.
run_reshard "$OUT/link.txt" --iters 10 --from-mesh 1 --from-ranks 0 --to-mesh 1 --to-ranks 2 --world-size 4 \
  --from R --to R --shape 16384x16384 --ranks-per-node 2 --transport nccl
echo "link: $(grep -E '^  ' "$OUT/link.txt" | tail -1)"
for shape in "${SHAPES[@]}"; do
  for c in "${CASES[@]}"; do
    for form in auto flat; do
      flags=$([ $form = flat ] && echo "--transport nccl --relay never" || echo "")
      name=$(echo "$c $shape $form" | tr -c 'A-Za-z0-9\n' '_')
      $R plan $c --shape $shape --ranks-per-node 2 --profile $P $flags --json "$OUT/plan_$name.json" > /dev/null 2>&1
      if [ $form = flat ]; then  # flat: no hierarchical all_reduce either (the key dropped; the plan priced anew)
        python3 -c "import json, sys; p = json.load(open(sys.argv[1])); [s.pop('hierarchical', None) for s in p['steps']]
json.dump(p, open(sys.argv[1], 'w'))" "$OUT/plan_$name.json"
        $R plan --load "$OUT/plan_$name.json" --json "$OUT/plan_$name.json" > /dev/null 2>&1
      fi
      sent=$(lo_tx)
      run_reshard "$OUT/run_$name.txt" --iters 10 --warmup 5 --plan "$OUT/plan_$name.json"
      sent=$(( $(lo_tx) - sent ))
      python3 - "$OUT/plan_$name.json" "$OUT/run_$name.txt" "$c $shape $form" "$sent" <<'PY' | tee -a "$OUT/two_nodes.txt"
import json, sys
plan = json.load(open(sys.argv[1]))
socket = int(sys.argv[4]) / 17  # 2 verification runs + 5 warm-up + 10 timed calls
rows = [l for l in open(sys.argv[2]) if l.startswith("  ")]
verified = [l.strip() for l in open(sys.argv[2]) if "verified" in l]
nodes = [l.strip("# \n") for l in open(sys.argv[2]) if l.startswith("# between nodes")]
route = " + ".join(f"{s['kind']}/{s.get('transport', '')}" + ("/hierarchical" if s.get("hierarchical") else "") +
                   ("/mixed" if s.get("mixed") else "") + ("/relayed" if s.get("relayed") else "") for s in plan["steps"])
print(f"{sys.argv[3]} | {route} | est {plan['estimated_us']:.0f} us | {nodes[-1] if nodes else 'no node count'} | "
      f"sockets {socket / 2**20:.1f} MiB per call (plan {plan.get('inter_node_bytes', 0) / 2**20:.1f}, least "
      f"{(plan.get('min_inter_node_bytes') or 0) / 2**20:.1f}) | "
      f"{rows[-1].split()[-8:] if rows else 'no run'} | {verified[-1] if verified else 'not verified'}")
PY
      [ "$(left)" -lt 120 ] && break 3
    done
  done
done
echo "[$(el) s] reshard runs"
if [ "$(left)" -gt 150 ]; then
  [[ $EMULATION == sockets ]] && export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
  node_env=$([[ $EMULATION == hostid ]] && echo 'NCCL_HOSTID=node$((RANK / 2))' || echo 'true')
  timeout $(( $(left) - 30 )) torchrun --nproc-per-node 4 --no-python bash -c "$node_env; export NCCL_HOSTID 2>/dev/null; \
    exec python3 \"\$0\" \"\$@\"" python/bench/bench_torch.py --out "$OUT/bench_torch" --ranks-per-node 2 --profile $P \
    --iters 5 --warmup 2 --sizes 256MiB,1GiB --cases 'S0->S1,S0->R,P->R' > "$OUT/bench_torch.log" 2>&1
  echo "bench_torch exit $?"; grep -E "PyTorch|equal" "$OUT/bench_torch.log" | tail -12
fi
echo "[$(el) s] done"
