# Drive recipes at quick on a bare GPU machine (bf16, as auto picks there), each recipe in its own store, side
# by side. Before the call, here: `python bench/drive_pack.py .gpu-drive/cache --assets ... --datasets ...`,
# built data sets optionally as .gpu-drive/datasets.tgz, pure-Python packages trimmed into .gpu-drive/site,
# wheels of the missing packages in .whl (diskcache, datasets, dill, multiprocess, plotly, mido,
# importlib_resources); the device call carries .gpu-drive and .whl and runs
#     RECIPES="kao" WORKERS=10 DRIVE_S=390 bash bench/gpu_drive.sh
# Each recipe's log, its verdicts (CSV) and its store (records only, no weights) come back under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.gpu-drive/site PYTHONUNBUFFERED=1 TRANSFERLAB_CACHE=/tmp/tlcache
[ -d /tmp/tlcache ] || cp -r .gpu-drive/cache /tmp/tlcache && python3 bench/drive_pack.py /tmp/tlcache --unpack || exit 1
[ -f .gpu-drive/datasets.tgz ] && tar xzf .gpu-drive/datasets.tgz -C /tmp/tlcache
for r in ${RECIPES:-tamkin}; do
  timeout ${DRIVE_S:-420} python3 bench/recipe_drive.py $r --budget quick --workers ${WORKERS:-8} \
    --cap-minutes ${CAP:-120} --store /tmp/st-$r --out $OUT/$r-gpu.csv > $OUT/$r-gpu.log 2>&1 &
done
wait
for r in ${RECIPES:-tamkin}; do
  tail -22 $OUT/$r-gpu.log
  (cd /tmp/st-$r && tar czf $OUT/$r-store.tgz --exclude='*.safetensors' --exclude='mapping.json' db runs)
done
