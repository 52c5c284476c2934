"""Without torch, importing sst_cdma.tools.capture says how to install it (runs without torch too)."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def test_import_without_torch_gives_install_hint():
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # makes "import torch" raise ImportError
        try:
            import sst_cdma.tools.capture
        except ImportError as exc:
            print("ERR", exc.name, exc)
        else:
            print("imported")
        import sst_cdma.profiles  # the profile API itself needs no torch
        print("profiles ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "ERR torch" in out, out
    assert "pip install 'sst-cdma[capture]'" in out
    assert "profiles ok" in out
