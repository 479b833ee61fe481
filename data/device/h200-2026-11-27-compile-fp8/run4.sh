# The fourth call (a fresh machine): torchtitan's own TransformerBlock (9dec370's models/llama/model.py and
# models/norms.py, extracted from the repository into build/torchtitan-9dec370 with torchtitan.utils stubbed
# to `device_module = torch.cuda`, carried), eager / compiled / compiled float8 (torchao 0.17.0 from build/wheels).
d=$HOME/torchao-0.17.0; mkdir -p $d && (cd $d && python3 -m zipfile -e "$OLDPWD"/build/wheels/torchao-0.17.0-*.whl .)
export PYTHONPATH=$d
timeout 230 python3 scripts/time_torchtitan_block.py --torchtitan build/torchtitan-9dec370 --out $OUT/torchtitan-block \
  2>&1 | grep -v -i "warn\|Configuration class\|context_fn\|in-place ops\|^W1127.*\] \[0/0\] *$" | tail -12
cut -d, -f1-21 $OUT/torchtitan-block/blocks.csv
