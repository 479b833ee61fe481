set -x
timeout 200 python3 scripts/trace_allocator.py --out $OUT/traces --cases torch-1f1b 2>&1 | tail -5
