"""Pictures as a user sees them: a headless Chromium screenshot of an HTML file, read back as
pixels (matplotlib's PNG reader), and small helpers to find colours in them.

``make test`` installs Debian's chromium when it is missing; without one the picture tests fail
with that instruction rather than skip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np


def chromium() -> str:
    found = os.environ.get("KRAFTLAKE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise AssertionError("the picture tests need chromium: `make chromium` installs Debian's (as root)")
    return found


def _run(args: list[str], *, capture: bool = False) -> str:
    """Chromium headless with ``args``; its profile and caches in a directory of its own, removed after."""
    import tempfile

    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", *args]
    with tempfile.TemporaryDirectory(prefix="kraftlake-chromium-") as home:
        env = {**os.environ, "HOME": home, "XDG_CONFIG_HOME": home, "XDG_CACHE_HOME": home}
        done = subprocess.run(
            [*cmd, f"--user-data-dir={home}/profile"], check=True, capture_output=True, timeout=180, env=env
        )
    return done.stdout.decode() if capture else ""


def shoot(page: Path, png: Path, *, width: int = 1300, height: int = 2000, fragment: str = "") -> Path:
    """Render ``page`` (its URI with ``#fragment``) headless at ``width`` x ``height`` into ``png``."""
    _run(
        [
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            page.resolve().as_uri() + (f"#{fragment}" if fragment else ""),
        ]
    )
    return png


def screenshot(page: Path, png: Path, *, width: int = 1300, height: int = 2000, fragment: str = "") -> np.ndarray:
    """Render ``page`` headless at ``width`` x ``height`` and return its pixels (H x W x RGB,
    0-255 integers)."""
    return png_pixels(shoot(page, png, width=width, height=height, fragment=fragment))


def dom(page: Path, fragment: str = "") -> str:
    """``page``'s document after its scripts ran (opened with ``#fragment``), as HTML."""
    return _run(
        ["--dump-dom", "--virtual-time-budget=2000", page.resolve().as_uri() + (f"#{fragment}" if fragment else "")],
        capture=True,
    )


def png_pixels(png: Path) -> np.ndarray:
    import matplotlib.image as mpimg

    img = mpimg.imread(png)
    return (np.asarray(img)[..., :3] * 255).round().astype(np.int16)


def mask(pixels: np.ndarray, colour: str, tolerance: int = 6) -> np.ndarray:
    """Where ``pixels`` are ``colour`` (#rrggbb), give or take ``tolerance`` per channel."""
    rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    return (np.abs(pixels - rgb) <= tolerance).all(axis=-1)


def bands(rows: np.ndarray, min_gap: int = 2) -> list[tuple[int, int]]:
    """Runs of True in a 1-D array (gaps shorter than ``min_gap`` joined): (first, last) index."""
    out: list[tuple[int, int]] = []
    for i in np.flatnonzero(rows):
        if out and i - out[-1][1] <= min_gap:
            out[-1] = (out[-1][0], int(i))
        else:
            out.append((int(i), int(i)))
    return out
