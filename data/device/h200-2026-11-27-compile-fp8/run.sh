# One device call (from the repository root; build/wheels carried: torchao wheels from PyPI, the
# device has no registry): torchtitan's 405B pipeline stage with torch.compile and torchao float8
# (trace_allocator.py cases), and ScheduleInterleaved1F1B's stage (torch-interleaved), four processes
# at once on the one GPU (each its own allocator; only memory is measured).
set -x
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)"
AO=""
for v in 0.17.0 0.18.0 0.16.0 0.15.0; do
  d=$HOME/torchao-$v; mkdir -p $d && (cd $d && python3 -m zipfile -e "$OLDPWD"/build/wheels/torchao-$v-*.whl .)
  if PYTHONPATH=$d timeout 120 python3 - <<'PY'
import torch, torchao
from torchao.float8 import Float8LinearConfig, convert_to_float8_training
from torchao.float8.float8_tensor_parallel import Float8ColwiseParallel
m = torch.nn.Sequential(torch.nn.Linear(256, 256, bias=False)).cuda()
convert_to_float8_training(m, config=Float8LinearConfig(enable_fsdp_float8_all_gather=True))
x = torch.randn(64, 256, device="cuda", requires_grad=True)
torch.compile(m)(x).sum().backward()
print("torchao", torchao.__version__, "float8 ok")
PY
  then AO=$d; break; fi
done
echo "torchao at: $AO"
export PYTHONPATH=$AO
for c in fsdp-tp-stage-1f1b-compile fsdp-tp-stage-1f1b-compile-fp8 fsdp-tp-stage-1f1b-32k-compile-fp8 torch-interleaved; do
  timeout 400 python3 scripts/trace_allocator.py --out $OUT/traces-$c --cases $c > $OUT/$c.log 2>&1 &
done
wait
for c in fsdp-tp-stage-1f1b-compile fsdp-tp-stage-1f1b-compile-fp8 fsdp-tp-stage-1f1b-32k-compile-fp8 torch-interleaved; do
  echo "== $c"; grep -v -i warn $OUT/$c.log | tail -6; cat $OUT/traces-$c/summary.json
done
