#!/usr/bin/env bash
# On the 2-GPU machine, one call: build; where the Python example crashes (faulthandler on both ranks, cuda-gdb's
# native stack on rank 0); then issue #19's GPU points (beyond.sh's batch bench and (2) -> (1) runs). Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/lib.sh
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
device_setup > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
echo "[$(el) s] built"; cat "$OUT/build.txt" | head -3
export PYTHONPATH="$PWD/build-device/python" PYTHONFAULTHANDLER=1 OMP_NUM_THREADS=4
timeout 60 /opt/torch/.venv/bin/python -c 'import reshard, reshard.torch; print("import ok", reshard.__file__)' 2>&1 | tail -5
timeout 90 torchrun --nproc-per-node 2 python/examples/dtensor_redistribute.py > "$OUT/example.log" 2>&1
echo "example exit $?"; grep -vE "^\s*$|torch/distributed/elastic|^  File|^    " "$OUT/example.log" | head -40
cat > /tmp/gdbwrap.sh <<'W'
#!/usr/bin/env bash
if [ "$RANK" = 0 ]; then exec /usr/local/cuda/bin/cuda-gdb -q -batch -ex run -ex "bt 40" --args /opt/torch/.venv/bin/python "$@"
else exec /opt/torch/.venv/bin/python "$@"; fi
W
chmod +x /tmp/gdbwrap.sh
timeout 150 torchrun --nproc-per-node 2 --no-python /tmp/gdbwrap.sh python/examples/dtensor_redistribute.py > "$OUT/example_gdb.log" 2>&1
echo "gdb exit $?"; grep -E "^#[0-9]+|SIGSEGV|signal" "$OUT/example_gdb.log" | head -45
echo "[$(el) s] python"
timeout 100 build-device/tools/reshard bench --backend nccl --batch 100 --meshes 2 --sizes 1MiB --dtypes f32 \
  --placements S0,S1,R --strategies collective,p2p --transports nccl --iters 50 --warmup 10 --csv "$OUT/batch100.csv" 2>&1 | tail -14
for shape in 8192x8192 16384x16384; do for tr in nccl nvlink; do
  timeout 60 build-device/tools/reshard run --backend nccl --transport $tr --from-mesh 2 --to-mesh 1 --to-ranks 1 \
    --from S0 --to R --shape $shape --iters 20 2>&1 | grep -vE "^# (reshard run)" | tail -3
done; done | tee "$OUT/cross_mesh.txt"
echo "[$(el) s] done"
