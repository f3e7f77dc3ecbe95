#!/usr/bin/env bash
# On the 4-GPU machine, one call: two nodes of two GPUs emulated on one host. NCCL is forced onto its network path
# (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, sockets on the loopback interface), so every byte NCCL carries travels as it
# would between nodes; reshard plans for 2 ranks per node with a profile calibrated under the emulation (`reshard
# calibrate --nccl-link`), so it carries a node's own traffic one-sided over NVLink (mixed steps) and sends into each
# node once what several of its ranks need (relayed steps; docs/nodes.md). Per case at 256 MiB and
# 1 GiB f32: reshard's plan (auto) and the flat NCCL plan (--transport nccl --relay never, no hierarchical all_reduce),
# each run from its plan file, verified, with
# the bytes between nodes (measured: the loopback interface's bytes sent during the run over its 17 calls, NCCL's setup
# included, a node's own NCCL traffic too; counted from the ranks' programs and from the plan) and the least the
# layouts need; the
# link: a 1 GiB transfer from GPU 0 to GPU 2 under the same settings (bound = least bytes into a node / its rate).
# Then reshard.torch against DTensor.redistribute under the same NCCL settings (python/bench/bench_torch.py). Files
# under $OUT: two_nodes.txt (the table), calibrate.txt, emulated.json, emulated_processes.json (the inter-node link
# calibrated between two processes, as on a cluster), run_*.txt, link.txt, bench_torch/.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
device_begin || exit 1
echo "[$(el) s] built"
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
# Bytes sent on the loopback interface so far: every byte NCCL carries here goes through it (and little else).
lo_tx() { awk '$1 == "lo:" { print $10 }' /proc/net/dev; }
CASES=("--mesh 4 --from S0 --to R" "--mesh 2x2 --from S0,S1 --to S1,S0" "--mesh 2x2 --from S0,S0 --to S1,S1"
       "--mesh 4 --from P --to R" "--from-mesh 2 --from-ranks 0,1 --to-mesh 2 --to-ranks 2,3 --world-size 4 --from S0 --to R")
SHAPES=("8192x8192" "16384x16384")  # 256 MiB, 1 GiB of f32
# The emulated machine's profile: NCCL measured on its network path for both links (within a "node" NCCL takes the
# sockets here too), the one-sided transport as measured; every plan below is made with it.
timeout 200 $R calibrate --nccl-link intra_node --sizes 1MiB,16MiB,256MiB --iters 5 --no-mapping --out "$OUT/emulated_intra.json" \
  > "$OUT/calibrate.txt" 2>&1
timeout 200 $R calibrate --nccl-link inter_node --sizes 1MiB,16MiB,256MiB --iters 5 --no-mapping --base "$OUT/emulated_intra.json" \
  --out "$OUT/emulated.json" >> "$OUT/calibrate.txt" 2>&1
grep -E "p2p|all_gather|nvlink" "$OUT/calibrate.txt" | head -8
# The same link measured as on a cluster: two processes, one per "node" (GPUs 0 and 2), `calibrate` between processes.
rv="$OUT/rv_calibrate"
for rk in 0 1; do
  RESHARD_RENDEZVOUS_TOKEN=calib$$ RANK=$rk LOCAL_RANK=$((2 * rk)) WORLD_SIZE=2 timeout 200 $R calibrate \
    --nccl-link inter_node --sizes 1MiB,16MiB,256MiB --iters 5 --base "$OUT/emulated.json" --rendezvous file:$rv \
    --out "$OUT/emulated_processes.json" > "$OUT/calibrate_processes_$rk.txt" 2>&1 &
done
wait; rm -f "$rv"
grep -hE "calibrated between|inter_node.p2p|inter_node.all_reduce|error" "$OUT"/calibrate_processes_*.txt | head -6
P="$OUT/emulated.json"
echo "[$(el) s] calibrated"
# The link between "nodes": one 1 GiB p2p exchange from GPU 0's node to the other, flat NCCL, as reshard runs it.
timeout 120 $R run --backend nccl --iters 10 --from-mesh 1 --from-ranks 0 --to-mesh 1 --to-ranks 2 --world-size 4 \
  --from R --to R --shape 16384x16384 --ranks-per-node 2 --transport nccl > "$OUT/link.txt" 2>&1
echo "link: $(grep -E '^  ' "$OUT/link.txt" | tail -1)"
for shape in "${SHAPES[@]}"; do
  for c in "${CASES[@]}"; do
    for form in auto flat; do
      flags=$([ $form = flat ] && echo "--transport nccl --relay never" || echo "")
      name=$(echo "$c $shape $form" | tr -c 'A-Za-z0-9\n' '_')
      $R plan $c --shape $shape --ranks-per-node 2 --profile $P $flags --json "$OUT/plan_$name.json" > /dev/null 2>&1
      if [ $form = flat ]; then  # flat: no hierarchical all_reduce either (the key dropped; the plan priced anew)
        python3 -c "import json, sys; p = json.load(open(sys.argv[1])); [s.pop('hierarchical', None) for s in p['steps']]
json.dump(p, open(sys.argv[2], 'w'))" "$OUT/plan_$name.json" "$OUT/stripped.json"
        $R plan --load "$OUT/stripped.json" --json "$OUT/plan_$name.json" > /dev/null 2>&1
      fi
      sent=$(lo_tx)
      timeout 150 $R run --backend nccl --iters 10 --warmup 5 --plan "$OUT/plan_$name.json" > "$OUT/run_$name.txt" 2>&1
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
  timeout $(( $(left) - 30 )) torchrun --nproc-per-node 4 python/bench/bench_torch.py --out "$OUT/bench_torch" \
    --ranks-per-node 2 --profile $P --sizes 256MiB,1GiB --cases 'S0->S1,S0->R,P->R' > "$OUT/bench_torch.log" 2>&1
  echo "bench_torch exit $?"; grep -E "PyTorch|equal" "$OUT/bench_torch.log" | tail -12
fi
echo "[$(el) s] done"
