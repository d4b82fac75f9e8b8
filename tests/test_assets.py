"""Asset fetching: checksums, idempotence, hand-over of files, and errors that name the fix."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from labcore import assets
from labcore.assets import Asset, Member
from labcore.errors import AssetUnavailableError


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def _deb(path: Path, files: dict[str, bytes]) -> Path:
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    body = tar_bytes.getvalue()
    out = bytearray(b"!<arch>\n")
    for name, data in (("debian-binary", b"2.0\n"), ("data.tar.xz", body)):
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode() + data
        if len(data) % 2:
            out += b"\n"
    path.write_bytes(bytes(out))
    return path


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TRANSFERLAB_DOWNLOADS", str(tmp_path / "downloads"))
    return tmp_path


def _register(asset: Asset):
    assets.ASSETS.unregister(asset.name)
    return assets.ASSETS.register(asset.name, asset)


@pytest.fixture
def toy(sandbox):
    payload = b"sequence,label\nACGT,a\n"
    asset = _register(Asset(name="toy", kind="dataset", source="pypi", package="toy-pkg", version="1.0",
                            members=(Member("toy_pkg/data/x.csv", hashlib.sha256(payload).hexdigest(),
                                            len(payload)),),
                            licence="MIT", description="a toy", default=False))
    yield asset, payload
    assets.ASSETS.unregister("toy")


def test_extract_verify_and_idempotence(toy, sandbox):
    asset, payload = toy
    folder = sandbox / "downloads" / "pypi"
    folder.mkdir(parents=True)
    _wheel(folder / "toy_pkg-1.0-py3-none-any.whl", {"toy_pkg/data/x.csv": payload, "other": b"no"})
    messages = []
    assets.fetch("toy", progress=messages.append)
    assert (asset.directory / "x.csv").read_bytes() == payload
    assert assets.is_available("toy") and not (asset.directory / "other").exists()
    messages.clear()
    assets.fetch("toy", progress=messages.append)
    assert messages == []  # nothing to do the second time


def test_a_fetch_waits_while_another_process_fetches_the_asset_and_does_not_extract_it_again(toy, sandbox):
    asset, payload = toy
    folder = sandbox / "downloads" / "pypi"
    folder.mkdir(parents=True)
    _wheel(folder / "toy_pkg-1.0-py3-none-any.whl", {"toy_pkg/data/x.csv": payload})
    other = assets.fetch_lock(asset)  # another process, mid-fetch
    other.acquire()
    messages: list[str] = []
    waiting = threading.Thread(target=assets.fetch, args=("toy",), kwargs={"progress": messages.append})
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive() and not assets.is_available("toy")
    assets._install_member(asset, asset.members[0], payload)  # the other process extracts the file
    other.release()
    waiting.join(10)
    assert not waiting.is_alive() and messages == []  # it found the asset there and extracted nothing
    assert (asset.directory / "x.csv").read_bytes() == payload


def test_corrupt_package_is_refused_and_named(toy, sandbox):
    folder = sandbox / "downloads" / "pypi"
    folder.mkdir(parents=True)
    _wheel(folder / "toy_pkg-1.0-py3-none-any.whl", {"toy_pkg/data/x.csv": b"tampered"})
    with pytest.raises(AssetUnavailableError, match="checksum mismatch.*delete it"):
        assets.fetch("toy")
    assert not assets.is_available("toy")


def test_add_accepts_the_member_file_itself(toy, tmp_path):
    asset, payload = toy
    given = tmp_path / "x.csv"
    given.write_bytes(payload)
    assets.add("toy", given, progress=lambda _m: None)
    assert assets.is_available("toy")
    wrong = tmp_path / "y.csv"
    wrong.write_bytes(b"other")
    with pytest.raises(AssetUnavailableError, match="matches no file of asset 'toy'"):
        assets.add("toy", wrong)


def test_debian_member_extracted_without_dpkg(sandbox):
    payload = b"rda bytes"
    _register(Asset(name="toydeb", kind="dataset", source="debian", package="r-cran-toy", version="1.0-1",
                    members=(Member("usr/lib/R/toy.rda", hashlib.sha256(payload).hexdigest(), len(payload)),),
                    licence="GPL-2", description="toy", default=False))
    try:
        folder = sandbox / "downloads" / "debian"
        folder.mkdir(parents=True)
        _deb(folder / "r-cran-toy_1.0-1_amd64.deb", {"usr/lib/R/toy.rda": payload})
        assets.fetch("toydeb", progress=lambda _m: None)
        assert (assets.ASSETS["toydeb"].directory / "toy.rda").read_bytes() == payload
    finally:
        assets.ASSETS.unregister("toydeb")


def test_no_apt_get_says_how_to_hand_the_file_over(sandbox, monkeypatch):
    monkeypatch.setenv("PATH", str(sandbox))  # no apt-get anywhere
    with pytest.raises(AssetUnavailableError) as error:
        assets.fetch("uci-splice")
    message = str(error.value)
    assert "no apt-get" in message and "r-cran-mlbench" in message and "assets add uci-splice" in message


def test_unknown_asset_lists_valid_names():
    with pytest.raises(KeyError, match="valid names: minilm"):
        assets.fetch("minilmm")


def test_require_names_the_fetch_command(sandbox):
    with pytest.raises(AssetUnavailableError, match="assets fetch minilm"):
        assets.require("minilm")
