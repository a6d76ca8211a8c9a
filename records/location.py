"""Where a log lives. Today a local path: a plain path, or a ``file://`` URI. Any other URI
(``s3://``, ``gs://``, ``az://``…) is refused before anything is created, with an error that says
so, instead of becoming a local folder named after it (``Path("s3://b/x")`` is ``s3:/b/x``)."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from .errors import UnsupportedLocationError

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def local_path(location: str | os.PathLike[str]) -> str:
    """The absolute local path of ``location``; ``UnsupportedLocationError`` for a URI whose
    scheme is not ``file`` (or a ``file://`` URI naming another host)."""
    if not isinstance(location, str):
        return os.path.abspath(os.fspath(location))
    match = _URI.match(location)
    if match is None:
        return os.path.abspath(location)
    scheme = match.group(1).lower()
    if scheme == "file":
        parts = urlsplit(location)
        if parts.netloc not in ("", "localhost"):
            raise UnsupportedLocationError(
                f"{location}: a file:// URI must name a local path on this machine (file:///path)"
            )
        return os.path.abspath(unquote(parts.path))
    raise UnsupportedLocationError(
        f"{location}: kraftlake keeps logs on a local path or a file:// URI; {scheme}:// is not supported"
    )
