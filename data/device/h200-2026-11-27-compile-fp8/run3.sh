# The third call (a fresh machine): the kit's `compiled` table, torchtitan's blocks eager, torch.compile'd
# and compiled with torchao's float8 Linears (torchao 0.17.0 from build/wheels, unpacked on PYTHONPATH).
d=$HOME/torchao-0.17.0; mkdir -p $d && (cd $d && python3 -m zipfile -e "$OLDPWD"/build/wheels/torchao-0.17.0-*.whl .)
export PYTHONPATH=$d
timeout 320 python3 scripts/measure_device.py --out $OUT/kit-compiled --tables compiled --cluster h200-8x8-ib \
  --budget-s 230 --repeats 10 --warmup 3 2>&1 | grep -v -i "warn\|Configuration class" | tail -12
cut -d, -f1-21 $OUT/kit-compiled/blocks.csv
