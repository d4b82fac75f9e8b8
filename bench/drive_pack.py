"""Pack what a recipe drive needs for a bare GPU machine (one that has torch, transformers, pandas and scipy
but none of the lab's assets): chosen assets, with model weights halved to bf16, and built data sets, in a
cache folder that ``TRANSFERLAB_CACHE`` can point at.

    python bench/drive_pack.py OUT_DIR --assets minilm rotten-tomatoes --datasets text-sentiment
    python bench/drive_pack.py OUT_DIR --unpack     # on the GPU machine, before the drive (bench/gpu_drive.sh)

Halving the weights keeps a model within what one device call carries. ``--unpack`` widens them back to fp32
in the original file's layout (its header is packed beside it), so the file has the size the asset catalogue
records and the copied stamp stands: the lab checks a member's size and stamp, not its bytes. A packed model
therefore starts from bf16-rounded weights: accuracy changes in the last digits, speed in nothing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import struct
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from labcore import assets, paths

LIMIT = 64 * 2**20  # what one device call carries
HEADER = ".header"  # the original safetensors header, packed beside the halved file


def header_of(path: Path) -> bytes:
    with path.open("rb") as f:
        size = f.read(8)
        return size + f.read(struct.unpack("<Q", size)[0])


def pack_asset(name: str, out: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    source = assets.require(name)
    target = out / "assets" / source.name
    shutil.copytree(source, target, dirs_exist_ok=True)
    for weights in target.glob("*.safetensors"):
        weights.with_name(weights.name + HEADER).write_bytes(header_of(weights))
        halved = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous()
                  for k, v in load_file(str(weights)).items()}
        save_file(halved, str(weights), metadata={"format": "pt"})


def unpack(folder: Path) -> None:
    """Widen every packed model back to fp32, byte for byte in its original layout."""
    import json

    import torch
    from safetensors.torch import load_file

    for saved in folder.rglob("*.safetensors" + HEADER):
        weights = saved.with_name(saved.name[:-len(HEADER)])
        header = saved.read_bytes()
        layout = json.loads(header[8:])
        halved = load_file(str(weights))
        data = bytearray(max(t["data_offsets"][1] for k, t in layout.items() if k != "__metadata__"))
        for name, tensor in layout.items():
            if name == "__metadata__":
                continue
            start, end = tensor["data_offsets"]
            # Only floating tensors were halved; integer ones (position ids) travelled as they were.
            value = halved[name].to(torch.float32) if tensor["dtype"] == "F32" else halved[name]
            data[start:end] = value.contiguous().view(torch.uint8).numpy().tobytes()
        weights.write_bytes(header + bytes(data))
        saved.unlink()
        print(f"unpacked {weights}: {weights.stat().st_size:,} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--assets", nargs="*", default=[])
    parser.add_argument("--datasets", nargs="*", default=[])
    parser.add_argument("--unpack", action="store_true", help="widen a packed folder's models back to fp32")
    args = parser.parse_args()
    if args.unpack:
        return unpack(args.out)
    for name in args.assets:
        pack_asset(name, args.out)
    for name in args.datasets:
        source = paths.datasets_dir() / name
        if not source.is_dir():
            raise SystemExit(f"data set {name!r} is not built in {source.parent}: run a job on it here first")
        shutil.copytree(source, args.out / "datasets" / name, dirs_exist_ok=True)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"packed {args.out}: {size / 2**20:.1f} MiB" + (" (over the 64 MiB a device call carries)" if size > LIMIT else ""))


if __name__ == "__main__":
    main()
