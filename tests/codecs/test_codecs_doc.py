"""The worked example of docs/codecs.md ("Adding a codec") runs: a codec registered by a program
gets its element, runs through ``build()`` and in a hand-filled codec slot, and prints what the
guide says it prints."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "codecs.md"
BLOCK = re.compile(r"<!-- test: python -->\n```python\n(.*?)^```\n", re.M | re.S)


def test_the_adding_a_codec_example_runs_and_prints_its_elements_description(tmp_path):
    text = DOC.read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert len(blocks) == 1
    (tmp_path / "topologies").symlink_to(REPO / "topologies")
    out = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, env={**os.environ})
    assert out.returncode == 0, out.stderr
    printed = out.stdout.strip()
    assert printed == ("The cDMA engine's stored codec units (stream format id 250): the "
                       "element bytes as they are.")
    said = " ".join(text[text.index("It prints `"):].split("`")[1].split())
    assert said == printed
