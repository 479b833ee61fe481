set -x
python3 -c "import torch; print(torch.__version__)"
timeout 330 python3 scripts/trace_allocator.py --out $OUT/traces --cases torch-1f1b,torch-interleaved 2>&1 | tail -20
