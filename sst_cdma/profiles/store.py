"""Finding profiles: the ones shipped in ``workloads.profiles`` or a file path."""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from sst_cdma.profiles.errors import ProfileError
from sst_cdma.profiles.profile import DensityProfile

__all__ = ["load_profile", "shipped_profiles", "shipped_profile_path"]

_PACKAGE = "workloads.profiles"
_CACHE_SIZE = 64  # parsed profiles kept (a run reads one or two, however many engines it has)
#: (path as given, file identity and version, registered codecs) -> the profile read from it
_parsed: dict[tuple, DensityProfile] = {}


def _shipped_dir() -> Path:
    return Path(str(resources.files(_PACKAGE)))


def shipped_profiles() -> list[str]:
    """Network names of the profiles shipped with sst-cdma (``workloads/profiles/NAME.json``)."""
    return sorted(p.stem for p in _shipped_dir().glob("*.json"))


def shipped_profile_path(network: str) -> Path:
    """Path of the shipped profile of ``network``; :class:`ProfileError` if there is none."""
    path = _shipped_dir() / f"{network}.json"
    if not path.is_file():
        known = ", ".join(shipped_profiles()) or "none"
        raise ProfileError(f"no shipped density profile for network {network!r} "
                           f"(shipped: {known}); pass a path to a profile file instead")
    return path


def _read(path: str | os.PathLike[str]) -> DensityProfile:
    """:meth:`DensityProfile.load`, parsed once per file version: every cDMA engine of a run
    reads the same profile. The key holds the file's inode, size and modification time, so
    an edited or replaced file is read again, and the registered codecs, which decide what a
    file's ``ratios`` may name. Profiles are immutable, so engines can share one."""
    from sst_cdma.codecs.registry import algorithm_names

    try:
        st = os.stat(path)
    except OSError:
        return DensityProfile.load(path)  # the loader names the fault
    key = (os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns, tuple(algorithm_names()))
    profile = _parsed.get(key)
    if profile is None:
        profile = DensityProfile.load(path)
        if len(_parsed) >= _CACHE_SIZE:
            _parsed.clear()
        _parsed[key] = profile
    return profile


def load_profile(name_or_path: str | os.PathLike[str]) -> DensityProfile:
    """Load a profile by file path, or a shipped one by network name.

    Anything that contains a path separator or ends in ``.json`` is read as a path; otherwise
    it is a network name looked up in the shipped profiles (a stray file called ``vgg16`` in
    the working directory does not shadow the shipped profile). A shipped
    profile must describe the network its file is named after.
    """
    text = os.fspath(name_or_path)
    if (isinstance(name_or_path, os.PathLike) or text.endswith(".json")
            or os.sep in text or "/" in text):
        return _read(text)
    profile = _read(shipped_profile_path(text))
    if profile.network != text:
        raise ProfileError(f"{profile.source}: network: {profile.network!r} does not match the "
                           f"file name {text!r}")
    return profile
