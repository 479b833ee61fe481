set -x
nvidia-smi --query-gpu=name,memory.total --format=csv
python3 -c "import torch; print(torch.__version__)"
timeout 200 python3 scripts/trace_allocator.py --out $OUT/traces --cases fsdp-tp-stage-1f1b,fsdp-tp-stage-1f1b-32k 2>&1 | tail -20
timeout 180 python3 scripts/time_context_parallel.py --out $OUT/cp --cp 1,2,4,8 --budget-s 150 2>&1 | tail -40
