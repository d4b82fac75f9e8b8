# One device call: bench/gpu.py's measurements, then recipe drives, then (f) with what time is left; run on a bare
# GPU machine from the repository's root, carrying .gpu-drive, .whl and .gpu-bench:
#     ONLY=abcd RECIPES=orca WORKERS=12 DRIVE_S=300 ROUND_S=575 bash bench/gpu_round.sh
# (f) gets what is left of ROUND_S seconds once the rest is done, if that is a minute or more.
# .gpu-bench holds bench/gpu.py --pack's data sets (dna-splice.json, mlm-batches.json) without the model: MiniLM
# comes from the drive's pack (.gpu-drive), widened back to fp32 by bench/gpu_setup.sh. What comes back under $OUT:
# gpu.log, each drive's log, verdicts and store (bench/gpu_drive.sh), gpu-f.log.
source bench/gpu_setup.sh || exit 1
ln -sfn /tmp/tlcache/assets/minilm .gpu-bench/minilm-bf16
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 bench/gpu.py --carried .gpu-bench --only ${ONLY:-abcd} 2>&1 | tee $OUT/gpu.log | grep -v Warning
[ -n "$RECIPES" ] && bash bench/gpu_drive.sh
F_S=$(( ${ROUND_S:-0} - SECONDS ))
echo "(f) gets ${F_S} s"
[ "$F_S" -ge 60 ] && timeout $F_S python3 bench/gpu.py --carried .gpu-bench --only f > $OUT/gpu-f.log 2>&1
cat $OUT/gpu-f.log 2>/dev/null | grep "(f)\|    "
exit 0
