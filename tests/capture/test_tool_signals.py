"""The measuring commands stop on SIGTERM as ``sst`` does (issue #34): one line naming the
signal, exit status 143, no traceback and nothing written; the attack is a supervisor
(``timeout``, SLURM, ``docker stop``) ending a long measurement."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}

#: each command with arguments that keep it busy for minutes
LONG = {
    "time-cpu-adam": ["--sizes", "4Mi", "--threads", "1", "--repeat", "100000",
                      "--implementations", "for-loop"],
    "capture-states": ["--steps", "100000", "--checkpoints", "0,1", "--algorithms", "zvc"],
    "time-layers": ["--network", "alexnet", "--batch", "64", "--repeat", "100000"],
}


def wait_for_torch(proc: subprocess.Popen) -> None:
    """Return once ``proc`` has PyTorch's library mapped (the command's handlers are set
    before it imports PyTorch)."""
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + 120
    while "libtorch" not in maps.read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


#: every measuring command stops through tool_main.run_tool; the default tier stops one of them
#: (each start imports PyTorch: ~3 CPU-s), the slow tier the others
DEFAULT_TIER = "capture-states"


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("command", [
    pytest.param(c, id=c, marks=[] if c == DEFAULT_TIER else [pytest.mark.slow])
    for c in sorted(LONG)])
def test_sigterm_stops_a_measuring_command_in_one_line(tmp_path, command):
    out = tmp_path / "out.json"
    proc = subprocess.Popen([sys.executable, "-m", "sst_cdma.tools.cli.sst_cdma_main", command,
                             *LONG[command], "--output", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=ENV)
    wait_for_torch(proc)                   # importing PyTorch: the command is under way
    time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err == f"sst-cdma {command}: stopped by SIGTERM\n"
    assert not out.exists()
