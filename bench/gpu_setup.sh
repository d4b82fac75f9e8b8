# Sourced on a bare GPU machine by bench/gpu_drive.sh and bench/gpu_round.sh: the carried wheels installed into
# /tmp/site, the lab's cache (the packed assets widened back to fp32, the built data sets) in /tmp/tlcache, and the
# variables that point the lab at both. Each step is done once per machine.
[ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD/.gpu-drive/site PYTHONUNBUFFERED=1 TRANSFERLAB_CACHE=/tmp/tlcache
if [ ! -d /tmp/tlcache ]; then
  cp -r .gpu-drive/cache /tmp/tlcache && python3 bench/drive_pack.py /tmp/tlcache --unpack || return 1
  [ -f .gpu-drive/datasets.tgz ] && tar xzf .gpu-drive/datasets.tgz -C /tmp/tlcache
fi
return 0
