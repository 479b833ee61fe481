# The fifth call (a fresh machine): torchtitan's loss and output projection timed (scripts/time_loss.py).
timeout 150 python3 scripts/time_loss.py --out $OUT/loss 2>&1 | tail -8
cat $OUT/loss/loss.csv | cut -d, -f1-10
