"""Files written whole: a reader (or a run that fails halfway) never sees half of one."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Union

__all__ = ["replace_whole", "write_text_whole"]

PathLike = Union[str, "os.PathLike[str]"]


def replace_whole(path: PathLike, write: Callable[[Path], object]) -> None:
    """Let ``write`` write a temporary file beside ``path`` (a link's target: the link is kept),
    then rename it over ``path`` in one step, keeping an existing file's permissions. If
    ``write`` or the rename fails, ``path`` is left as it was and the temporary file removed;
    the exception propagates."""
    target = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                               dir=os.path.dirname(target))
    os.close(fd)
    try:
        write(Path(tmp))
        if os.path.exists(target):
            mode = os.stat(target).st_mode & 0o7777
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_whole(path: PathLike, text: str) -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` with :func:`replace_whole`."""
    replace_whole(path, lambda tmp: tmp.write_text(text, encoding="utf-8", newline=""))
