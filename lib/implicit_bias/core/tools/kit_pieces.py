"""Files of the GPU kit larger than one part can hold travel in pieces, joined on the device.

A device command carries the working tree and one kit part under 64 MiB. As the tree grows,
single files stop fitting beside it (Fashion-MNIST's training images, 21.6 MiB xz-compressed;
the SCS wheel, 20.9 MiB recompressed). The builder (`gpu_kit`) splits such a file into pieces
named `<file>.piece-NNN-of-MMM`, which pack like any other file. On the device, `run.sh` calls
this file as a script before it installs anything (standard library only: nothing is installed
yet):

    python3 kit_pieces.py WORK PART_FOLDER [PART_FOLDER ...]

It keeps every carried piece in `WORK/pieces/` (a warm machine keeps it between commands, so a
file whose pieces came in several parts is joined once its last piece is there), and writes
each complete file, checked against the SHA-256 its part records, into the carried part folder
holding its last piece, at the path the whole file would have had. From there the wheel is
installed and the dataset unpacked as if it had travelled whole.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

PIECE_BYTES = 8 * 2**20  # files larger than this travel in pieces of at most this size
PIECE = re.compile(r"^(?P<whole>.+)\.piece-(?P<index>\d{3})-of-(?P<count>\d{3})$")


def piece_name(whole: str, index: int, count: int) -> str:
    return f"{whole}.piece-{index:03d}-of-{count:03d}"


def split(path: Path, dest: Path, size: int = PIECE_BYTES) -> list[Path]:
    """`path` in pieces of at most `size` bytes in `dest` (reused when present and newer than
    `path`); `[path]` itself when it is no larger than `size`."""
    total = path.stat().st_size
    if total <= size:
        return [path]
    count = -(-total // size)
    if count > 999:
        raise ValueError(f"{path.name}: {count} pieces of {size} bytes (at most 999)")
    dest.mkdir(parents=True, exist_ok=True)
    pieces = [dest / piece_name(path.name, i + 1, count) for i in range(count)]
    mtime = path.stat().st_mtime
    if all(p.is_file() and p.stat().st_mtime >= mtime for p in pieces):
        return pieces
    with open(path, "rb") as source:
        for piece in pieces:
            partial = piece.with_name(piece.name + ".partial")
            partial.write_bytes(source.read(size))
            partial.replace(piece)
    return pieces


def sha256(path: Path) -> str:
    # engine.data has the same helper; this file runs as a script before anything is
    # installed, so it imports nothing of the package (gpu_kit imports this one)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _whole_sha256(part: Path) -> dict[str, str]:
    """The whole files' SHA-256 by their path in the part (`part.json`'s piece records)."""
    manifest = part / "part.json"
    if not manifest.is_file():
        return {}
    entry = json.loads(manifest.read_text())
    records = [*entry.get("wheels", []), *(r for rs in entry.get("data", {}).values() for r in rs)]
    return {r["whole"]: r["whole_sha256"] for r in records if "whole" in r}


def assemble(parts: list[Path], work: Path) -> list[Path]:
    """Keep the carried parts' pieces in `work/pieces/`, and join each file whose pieces are all
    there into the carried part that holds its last piece. Returns the files joined. A joined
    file whose SHA-256 differs from its record raises ValueError (the partial file is removed)."""
    store = work / "pieces"
    arrived: dict[Path, tuple[Path, str]] = {}  # whole file (relative) -> part, expected sha256
    for part in parts:
        expected = _whole_sha256(part)
        for piece in sorted(part.rglob("*.piece-*-of-*")):
            match = PIECE.match(piece.name)
            if not match:
                continue
            relative = piece.parent.relative_to(part) / match["whole"]
            kept = store / relative.parent / piece.name
            kept.parent.mkdir(parents=True, exist_ok=True)
            if not kept.is_file() or kept.stat().st_size != piece.stat().st_size:
                shutil.copyfile(piece, kept.with_name(kept.name + ".partial"))
                kept.with_name(kept.name + ".partial").replace(kept)
            arrived[relative] = (part, expected.get(str(relative), ""))
    joined = []
    for relative, (part, whole_sha) in sorted(arrived.items()):
        folder = store / relative.parent
        found = sorted(folder.glob(f"{relative.name}.piece-*-of-*"))
        counts = {int(m["count"]) for p in found if (m := PIECE.match(p.name))}
        if len(counts) != 1 or len(found) != counts.pop():
            continue  # pieces still to come in a later part
        target = part / relative
        if target.is_file():
            continue
        partial = target.with_name(target.name + ".joining")
        with open(partial, "wb") as out:
            for piece in found:
                with open(piece, "rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
        if whole_sha and sha256(partial) != whole_sha:
            partial.unlink()
            raise ValueError(f"{relative}: joined from {len(found)} pieces, SHA-256 differs")
        partial.replace(target)
        joined.append(target)
    return joined


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: kit_pieces.py WORK PART_FOLDER [PART_FOLDER ...]", file=sys.stderr)
        return 2
    try:
        joined = assemble([Path(p) for p in argv[1:]], Path(argv[0]))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for path in joined:
        print(f"joined {path.name} from its pieces")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
