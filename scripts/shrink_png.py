"""Rewrite the PNGs under a folder as 256-colour palette images (median cut, no dithering).

Used by `make reference-report` so that the stored figures stay small (the plots have few
colours, so the palette loses nothing visible: about a third of the size). A file that would
not get smaller is left as it is. Usage: python scripts/shrink_png.py FOLDER
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from PIL import Image


def shrink(path: Path) -> tuple[int, int]:
    before = path.stat().st_size
    with Image.open(path) as image:
        palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                                dither=Image.Dither.NONE)
    tmp = path.with_name(f".{path.name}.tmp")
    palette.save(tmp, format="PNG", optimize=True)
    after = tmp.stat().st_size
    if after < before:
        os.replace(tmp, path)
        return before, after
    tmp.unlink()
    return before, before


def main(folder: str) -> int:
    paths = sorted(Path(folder).rglob("*.png"))
    if not paths:
        print(f"shrink_png: no PNG files under {folder}", file=sys.stderr)
        return 2
    sizes = [shrink(p) for p in paths]
    before, after = (sum(s[i] for s in sizes) for i in (0, 1))
    print(f"shrink_png: {len(paths)} PNG files, {before / 2**20:.1f} MB -> {after / 2**20:.1f} MB")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/shrink_png.py FOLDER")
    sys.exit(main(sys.argv[1]))
