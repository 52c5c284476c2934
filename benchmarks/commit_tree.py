"""Another commit of this repository checked out beside it, for the benchmarks that measure this
checkout against it in the same run (``--against REV``): a detached git worktree in a
temporary folder, removed again however the measurement ends.

    with other_tree("main") as other:
        ...  # run the same command from REPO and from other, alternately
"""
from __future__ import annotations

import contextlib
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]


class CheckoutError(SystemExit):
    """The revision to compare with cannot be checked out: one line naming the revision and
    git's reason, which a script that lets it through prints as it exits with status 1."""


@contextlib.contextmanager
def other_tree(rev: str, repo: Path = REPO) -> Iterator[Path]:
    """A detached worktree of ``rev`` (of ``repo``) in a temporary folder, for the length of
    the ``with`` block; :class:`CheckoutError` where git cannot check ``rev`` out."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "other"
        done = subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), rev],
                              cwd=repo, capture_output=True, text=True)
        if done.returncode:
            reason = (done.stderr.strip().splitlines() or ["git worktree add failed"])[-1]
            raise CheckoutError(f"--against {rev}: {reason}")
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo,
                           check=False, capture_output=True)
