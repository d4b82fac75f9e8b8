"""`make run` starts the app on 127.0.0.1 and it answers its health check."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import free_port, stop_process_group

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parent.parent


def test_make_run_serves_landing_page(fetched_assets):
    port = free_port()
    env = dict(os.environ)
    proc = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        body = ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as reply:
                    body = reply.read().decode()
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("make run exited early:\n" + (proc.stdout.read() if proc.stdout else ""))
                time.sleep(0.5)
        assert body.strip() == "ok"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
            assert reply.status == 200
    finally:
        stop_process_group(proc)
