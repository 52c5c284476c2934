"""The markdown tables of the project's pages and the commands that print them.

A page shows a table of simulated figures as EVALUATION.md does: a fenced block of commands
(``sst-cdma sweep``, then ``sst-cdma table`` and the like), then the tables those commands print,
in the order they print them, before the next fenced block or heading. :func:`run_block` runs a
block's commands as written, in a scratch folder that sees the checkout's files under their own
names, and returns what they printed; :func:`tables_in` reads the tables out of it, and
:func:`same_table` compares two tables cell by cell (the separator row's dashes and alignment
colons, and the spaces around a cell, are layout)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
#: how a page's command names the program, and what runs it here (the checkout's code)
PROGRAMS = {"sst-cdma": [sys.executable, "-m", "sst_cdma"],
            "sst": [sys.executable, "-m", "sst_cdma.tools.cli.sst_main"],
            "python": [sys.executable], "python3": [sys.executable]}
_SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_HEADING = re.compile(r"^#{1,6} ")
_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


@dataclass(frozen=True)
class Table:
    """A markdown table: the page it is on, its first line (1-based), the heading it is under,
    its number among that heading's tables (from 1) and its rows (the separator left out)."""

    page: str
    line: int
    heading: str
    number: int
    rows: tuple[tuple[str, ...], ...]

    @property
    def key(self) -> str:
        """``page § heading #n``: how the inventory names the table."""
        return f"{self.page} § {self.heading} #{self.number}"


@dataclass(frozen=True)
class Block:
    """A fenced block of commands: the page, its first line (the fence's) and its commands
    (continuation lines joined, comments and blank lines dropped)."""

    page: str
    line: int
    end: int
    commands: tuple[str, ...]


def _cells(line: str) -> tuple[str, ...]:
    body = line.strip()[1:]
    body = body[:-1] if body.endswith("|") else body
    return tuple(cell.strip() for cell in re.split(r"(?<!\\)\|", body))


def tables_in(text: str, page: str = "") -> list[Table]:
    """Every markdown table of ``text`` (a page, or what a command printed), in order; tables
    inside fenced blocks are left out."""
    out: list[Table] = []
    heading, counts, fenced = "", {}, False
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and _HEADING.match(line):
            heading = line.lstrip("#").strip()
        elif (not fenced and line.startswith("|") and i + 1 < len(lines)
              and _SEPARATOR.match(lines[i + 1].strip())):
            end = i + 2
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            counts[heading] = counts.get(heading, 0) + 1
            rows = (_cells(line),) + tuple(_cells(row) for row in lines[i + 2:end])
            out.append(Table(page, i + 1, heading, counts[heading], rows))
            i = end
            continue
        i += 1
    return out


def page_tables(path: Path) -> list[Table]:
    """The tables of the page at ``path`` (named relative to the repository)."""
    return tables_in(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))


def code_blocks(path: Path) -> list[Block]:
    """The fenced blocks of the page at ``path`` that hold commands (a plain or ``sh``/``bash``
    fence; YAML, JSON and Python blocks are not commands)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, start, body = [], None, []
    for number, line in enumerate(lines, 1):
        if start is None and line.startswith("```"):
            start, lang, body = number, line[3:].strip(), []
        elif start is not None and line.startswith("```"):
            if lang in ("", "sh", "bash", "console"):
                joined = "\n".join(body).replace("\\\n", " ")
                commands = tuple(c for c in (_strip_comment(x) for x in joined.splitlines()) if c)
                out.append(Block(str(path.relative_to(REPO)), start, number, commands))
            start = None
        elif start is not None:
            body.append(line)
    return out


def _strip_comment(line: str) -> str:
    try:
        return shlex.join(shlex.split(line, comments=True))
    except ValueError:  # not a command (a block of output or prose)
        return line.strip()


def block_starting(path: Path, command: str) -> Block:
    """The block of ``path`` whose first command is ``command``."""
    found = [b for b in code_blocks(path) if b.commands and b.commands[0] == command]
    assert len(found) == 1, f"{path.name}: {len(found)} blocks start with {command!r}"
    return found[0]


def tables_after(path: Path, block: Block) -> list[Table]:
    """The tables the page shows after ``block``, up to its next fenced block or heading."""
    text = path.read_text(encoding="utf-8").splitlines()
    stop = len(text)
    for number in range(block.end + 1, len(text) + 1):
        line = text[number - 1]
        if line.startswith("```") or _HEADING.match(line):
            stop = number
            break
    return [t for t in page_tables(path) if block.end < t.line < stop]


def scratch_checkout(folder: Path) -> Path:
    """``folder`` with a link to each of the checkout's top-level entries (not ``.git`` nor a
    ``results`` folder), so that a page's relative paths (``sweeps/systems.yaml``) name the
    checkout's files and what the commands write (``results/systems``) lands in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in REPO.iterdir():
        if entry.name not in (".git", "results") and not (folder / entry.name).exists():
            (folder / entry.name).symlink_to(entry)
    return folder


def run_block(block: Block, folder: Path, timeout: float = 1800) -> str:
    """Run ``block``'s commands as written, one after the other, in ``scratch_checkout(folder)``
    with the checkout's packages first on the path; what they printed on stdout, together.
    A command that fails fails the caller with its stderr."""
    cwd = scratch_checkout(folder)
    printed = []
    for command in block.commands:
        words = shlex.split(command)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        while words and _ASSIGNMENT.match(words[0]):
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        assert words and words[0] in PROGRAMS, f"{block.page}:{block.line}: {command!r}"
        done = subprocess.run(PROGRAMS[words[0]] + words[1:], cwd=cwd, env=env, text=True,
                              capture_output=True, timeout=timeout)
        assert done.returncode == 0, f"{block.page}:{block.line}: {command}\n{done.stderr}"
        printed.append(done.stdout)
    return "\n".join(printed)


def same_table(shown: Table, printed: Table) -> bool:
    """Whether the page's table holds the printed one's cells (layout aside)."""
    return shown.rows == printed.rows
