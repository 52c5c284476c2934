"""Print the README's second quickstart command (the one that installs the test extras and runs
the suite, the linter and the type checker): ``.ci/run`` runs this very line, so the two cannot
drift apart. Exits 1 with one line when the README no longer has it where it was."""
from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_command(text: str) -> str:
    """The one-line command of the second fenced block of the README's ``## Quickstart``
    section (ValueError when there is none, or it is not one line)."""
    if "\n## Quickstart\n" not in text:
        raise ValueError("no '## Quickstart' section")
    section = text.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", section, re.M | re.S)
    if len(blocks) < 2:
        raise ValueError(f"the Quickstart section has {len(blocks)} code block(s), not two")
    lines = blocks[1].strip().splitlines()
    if len(lines) != 1:
        raise ValueError(f"the Quickstart's second code block has {len(lines)} lines, not one")
    return lines[0]


def main() -> int:
    """Print the command, or say in one line why there is none."""
    try:
        print(readme_command(README.read_text("utf-8")))
    except (OSError, ValueError) as exc:
        print(f".ci/readme_command.py: {README}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
