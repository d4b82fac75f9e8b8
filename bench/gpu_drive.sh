# Drive recipes at quick on a bare GPU machine (bf16, as auto picks there), each recipe in its own store, side
# by side. Before the call, here: `python bench/drive_pack.py .gpu-drive/cache --assets ... --datasets ...`,
# built data sets optionally as .gpu-drive/datasets.tgz, pure-Python packages trimmed into .gpu-drive/site,
# wheels of the missing packages in .whl (diskcache, datasets, dill, multiprocess, plotly, mido,
# importlib_resources); the device call carries .gpu-drive and .whl and runs
#     RECIPES="kao" WORKERS=10 DRIVE_S=390 bash bench/gpu_drive.sh
# Each recipe's log, its verdicts (CSV) and its store (records only, no weights) come back under $OUT.
source bench/gpu_setup.sh || exit 1
for r in ${RECIPES:-tamkin}; do
  timeout ${DRIVE_S:-420} python3 bench/recipe_drive.py $r --budget quick --workers ${WORKERS:-8} \
    --cap-minutes ${CAP:-120} --store /tmp/st-$r --out $OUT/$r-gpu.csv > $OUT/$r-gpu.log 2>&1 &
done
wait
pkill -f -- '--store /tmp/st-'; sleep 2  # workers a timed-out drive left behind
for r in ${RECIPES:-tamkin}; do
  tail -22 $OUT/$r-gpu.log
  (cd /tmp/st-$r && tar czf $OUT/$r-store.tgz --exclude='*.safetensors' --exclude='mapping.json' db runs)
done
