# The second call, on the same warm machine: the two cases whose traces the first call could not
# bring back (the tool returns 8 files a call), logs kept off $OUT.
d=$HOME/torchao-0.17.0; mkdir -p $d && (cd $d && python3 -m zipfile -e "$OLDPWD"/build/wheels/torchao-0.17.0-*.whl .)
export PYTHONPATH=$d
for c in fsdp-tp-stage-1f1b-compile-fp8 torch-interleaved; do
  timeout 400 python3 scripts/trace_allocator.py --out $OUT/traces-$c --cases $c > /tmp/$c.log 2>&1 &
done
wait
for c in fsdp-tp-stage-1f1b-compile-fp8 torch-interleaved; do tail -1 /tmp/$c.log; done
