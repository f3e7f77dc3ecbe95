export NCCL_NVLS_ENABLE=0
for v in many_bf16 many_f32 many; do
  timeout 25 torchrun --nproc-per-node 4 python/gpu_tests/probe_torch_uneven.py $v > $OUT/$v.log 2>&1
  echo "== $v exit $?"; grep -E "^\[" $OUT/$v.log | sort | head -12
done
python3 -c "import torch; print(torch.__version__)"
