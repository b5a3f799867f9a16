"""The offline GPU run kit: everything a GPU machine without a package index needs to run the
book's paper profile on CUDA, in parts that each fit what one device command may carry.

`python -m implicit_bias.core.tools.gpu_kit build` (`make gpu-kit`) writes, in git-ignored folders:

- `gpu-kit/`: `run.sh` (the entry point), `kit.json` (what every part holds and which chapters
  each part makes runnable) and part 1; `gpu-kit-2/`, `gpu-kit-3/`, ...: the parts that did not
  fit beside it. A part holds cp312 manylinux wheels (`wheels/`) and datasets (`data/`, the idx
  files xz-compressed; the loader checks their SHA-256 once unpacked).
- The wheels (those over RECOMPRESS_ABOVE recompressed with LZMA, same files) are the
  project's run dependencies (pyproject.toml's, less the website toolchain, which a run does
  not use) and everything they require, at the versions of requirements.lock,
  less what the GPU image has (`.ci/gpu-image-packages.txt`). Part 1 holds every wheel that all
  chapters need; datasets and the wheels only some chapters need (SCS) fill the parts after it.
- Each part, with the working tree beside it, stays under `CARRY_LIMIT`.
- A file larger than a piece (at most `kit_pieces.PIECE_BYTES`, and a third of a part's room)
  travels in pieces, which `run.sh` joins on the device (`kit_pieces`) once the part holding
  the last piece is carried: only a piece must fit beside the working tree.

On the device, `bash gpu-kit/run.sh` installs the wheels of the parts present with `pip install
--no-index --no-deps --target` into scratch folders, puts them on PYTHONPATH in front of the
image's packages, and calls `python -m implicit_bias.core.tools.gpu_kit run`, which runs the
chapters that the parts present make runnable (`implicit_bias.core.tools.gpu_run`).
"""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.paths import project_root
from .kit_contents import (  # shared with the device side (gpu_run)
    DATASET_PATTERNS,
    KIT,
    OPTIONAL_WHEELS,
    chapter_needs,
    chapter_sources,
    normalize,
    wheel_name,
)
from .kit_pieces import PIECE_BYTES, sha256, split

CACHE = ".gpu-kit-cache"  # downloads and compressed datasets, reused by the next build
CARRY_LIMIT = 64 * 2**20  # what one device command carries: working tree and kit together
MARGIN = 2 * 2**20  # room for the tree to grow (results, chapters) after the kit is built
IMAGE_PACKAGES = ".ci/gpu-image-packages.txt"
RUN_SCRIPT = ".ci/gpu-kit-run.sh"  # copied to gpu-kit/run.sh
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux2014_x86_64")  # torch 2.11 needs glibc 2.28
# Project dependencies a chapter run never imports: they build the website.
WEBSITE_ONLY = ("jupyter-book", "sphinx", "myst-nb")
# Wheels larger than this travel LZMA-compressed (`recompress`) where that makes them smaller:
# scs 41.2 -> 20.9 MiB, sparsediffpy 11.6 -> 5.1, debugpy 5.1 -> 3.7, cvxpy 4.3 -> 3.3 (jedi, mostly
# text already deflated, would grow and travels as served).
RECOMPRESS_ABOVE = 256 * 2**10


def image_packages(root: Path | None = None) -> set[str]:
    """The GPU image's distributions (normalized names) from `.ci/gpu-image-packages.txt`."""
    path = (root or project_root()) / IMAGE_PACKAGES
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(normalize(re.split(r"[<>=!~ \[]", line, maxsplit=1)[0]))
    return names


def run_requirements(root: Path | None = None) -> list[str]:
    """pyproject.toml's dependencies that a chapter run needs: all but torch (the image's) and
    the website toolchain."""
    project = tomllib.loads(((root or project_root()) / "pyproject.toml").read_text())
    keep = []
    for spec in project["project"]["dependencies"]:
        name = _spec_name(spec)
        if name != "torch" and name not in {normalize(w) for w in WEBSITE_ONLY}:
            keep.append(spec)
    return keep


# -- chapters and what they need --------------------------------------------------------------


# -- packing ------------------------------------------------------------------------------------
@dataclass
class Item:
    """One thing a part carries: a wheel or a dataset (`key`: the name chapters need it by;
    None for wheels that every chapter needs)."""

    key: str | None
    files: list[Path]
    kind: str  # "wheel" or "dataset"

    @property
    def size(self) -> int:
        return sum(carried_size(f.stat().st_size) for f in self.files)


@dataclass
class Part:
    number: int
    items: list[Item] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(i.size for i in self.items)

    @property
    def folder(self) -> str:
        return KIT if self.number == 1 else f"{KIT}-{self.number}"


def pack(base: list[Item], extras: list[Item], capacity: int, demand: dict[str, int]) -> list[Part]:
    """The first parts hold `base` (what every chapter needs), largest first, as many parts as
    it takes beside the working tree (`base_parts`); the `extras` go, most demanded first (the
    number of chapters that need each), then largest first, into the first part with room.
    Raises ValueError when one item exceeds `capacity`."""
    parts: list[Part] = []

    def place(item: Item, what: str) -> None:
        if item.size > capacity:
            raise ValueError(
                f"{what} ({item.size / 2**20:.1f} MiB) exceeds a part: one device command "
                f"carries {capacity / 2**20:.1f} MiB beside the working tree"
            )
        for part in parts:
            if part.size + item.size <= capacity:
                part.items.append(item)
                return
        parts.append(Part(len(parts) + 1, [item]))

    for item in sorted(base, key=lambda i: (-i.size, str(i.files[0].name))):
        place(item, f"{item.files[0].name}, which every chapter needs,")
    if not parts:
        parts.append(Part(1))
    for item in sorted(extras, key=lambda i: (-demand.get(i.key or "", 0), -i.size, i.key)):
        place(item, f"{item.key} alone")
    return parts


def base_parts(parts: list[Part]) -> int:
    """How many parts the wheels every chapter needs fill: no chapter runs before the last."""
    return max([1, *(p.number for p in parts if any(i.key is None for i in p.items))])


def chapter_parts(needs: dict[str, set[str]], parts: list[Part]) -> dict[str, int]:
    """The part after which each chapter can run: the last part holding something it needs
    (1 when it needs nothing beyond part 1). A need that no part holds raises ValueError."""
    where = {i.key: p.number for p in parts for i in p.items if i.key}
    out = {}
    for chapter, wanted in needs.items():
        missing = sorted(w for w in wanted if w not in where)
        if missing:
            raise ValueError(f"{chapter} needs {', '.join(missing)}, which no part holds")
        out[chapter] = max([base_parts(parts), *(where[w] for w in wanted)])
    return out


# -- building ------------------------------------------------------------------------------------
def carried_size(size: int) -> int:
    """What a file of `size` bytes counts for in a device command's 64 MiB: as in a tar
    archive, a 512-byte header and its content in 512-byte blocks. Counted by content alone,
    a carry of 62.0 MiB (the tree's 2,798 files and part 1) was refused as over 64 MiB; as a
    tar archive it is 64.1 MiB."""
    return 512 + -(-size // 512) * 512


def tree_size(root: Path) -> int:
    """Bytes of what a device command copies besides the kit: tracked files and untracked ones
    that git does not ignore, each counted as `carried_size`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    total = 0
    for name in listed:
        path = root / os.fsdecode(name)
        if name and path.is_file() and not path.is_symlink():
            total += carried_size(path.stat().st_size)
    return total


def download_wheels(root: Path, dest: Path, image: set[str]) -> list[Path]:
    """cp312 wheels of the run requirements that the image lacks and of everything they
    require, at the lock's versions, into `dest` (emptied first), by pip download resolving for
    Python 3.12 on manylinux x86-64. Wheels of the image's distributions that the resolution
    pulls in (numpy, scipy) are downloaded and left out."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    wanted = [r for r in run_requirements(root) if _spec_name(r) not in image]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--only-binary=:all:",
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
        "--abi",
        f"cp{PYTHON_VERSION.replace('.', '')}",
        *(a for p in PLATFORMS for a in ("--platform", p)),
        "--dest",
        str(dest),
        "--constraint",
        str(root / "requirements.lock"),
        *wanted,
    ]
    subprocess.run(command, check=True)
    return sorted(w for w in dest.glob("*.whl") if wheel_name(w.name) not in image)


def _spec_name(spec: str) -> str:
    return normalize(re.split(r"[<>=!~ \[;]", spec, maxsplit=1)[0])


def recompress(wheel: Path, cache: Path) -> Path:
    """The wheel with its members LZMA-compressed (ZIP_LZMA, which pip, like Python's zipfile,
    reads): the same files in the same order, so the same RECORD and the same install, in about
    half the bytes for wheels of large shared libraries (scs: 41 -> 21 MiB). Cached in `cache`
    by the original's SHA-256."""
    target = cache / sha256(wheel)[:16] / wheel.name
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(partial, "w") as packed:
        for info in source.infolist():
            member = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            member.external_attr = info.external_attr
            member.compress_type = zipfile.ZIP_LZMA
            packed.writestr(member, source.read(info))
    partial.replace(target)
    return target


def compress_dataset(dataset: str, cache: Path) -> list[Path]:
    """The dataset's idx files, verified, xz-compressed into `cache/<dataset>/` (reused when
    present and newer than the source)."""
    from ..engine.data import CHECKSUMS, data_dir, verify

    verify(dataset)
    out = cache / dataset
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name in CHECKSUMS[dataset]:
        src, dst = data_dir() / dataset / name, out / f"{name}.xz"
        if not dst.exists() or dst.stat().st_mtime < src.stat().st_mtime:
            tmp = dst.with_suffix(".part")
            with open(src, "rb") as fin, lzma.open(tmp, "wb", preset=9) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            tmp.replace(dst)
        files.append(dst)
    return files


def wheel_modules(path: Path) -> set[str]:
    """The top-level modules a wheel installs (from its file list)."""
    names = set()
    with zipfile.ZipFile(path) as whl:
        for member in whl.namelist():
            top = member.split("/", 1)[0]
            if top.endswith((".dist-info", ".data")) or top.endswith(".libs"):
                continue
            names.add(top.split(".", 1)[0] if "/" not in member else top)
    return {n for n in names if n.isidentifier()}


def build(root: Path | None = None, limit: int = CARRY_LIMIT) -> dict:
    """Write the kit's parts and `gpu-kit/kit.json`; return the manifest."""
    from ..engine.paths import chapters

    root = root or project_root()
    cache = root / CACHE
    image = image_packages(root)
    downloaded = download_wheels(root, cache / "wheels", image)
    original = {}  # shipped wheel -> the wheel as PyPI serves it
    wheels = []
    for wheel in downloaded:
        shipped = wheel
        if wheel.stat().st_size > RECOMPRESS_ABOVE:
            packed = recompress(wheel, cache / "recompressed")
            shipped = packed if packed.stat().st_size < wheel.stat().st_size else wheel
        original[shipped] = wheel
        wheels.append(shipped)
    optional = {normalize(k) for k in OPTIONAL_WHEELS}
    # every file travels on its own, and one larger than PIECE_BYTES in pieces (joined on the
    # device by kit_pieces), so that only a piece must fit beside the working tree; a dataset or
    # wheel spread over parts is usable once its last part is there
    whole_of: dict[Path, Path] = {}  # piece -> the file it is a piece of

    tree = tree_size(root)
    capacity = limit - tree - MARGIN
    # pieces of a third of a part at most, so that they fill the room the other files leave
    # (pieces of 8 MiB in parts of 13 MiB left 5 MiB of each part empty: 8 parts, not 7)
    piece_bytes = max(2**20, min(PIECE_BYTES, (capacity // 3 - 1024) // 512 * 512))  # tar header

    def pieces(path: Path, folder: str) -> list[Path]:
        out = split(path, cache / "pieces" / str(piece_bytes) / folder, piece_bytes)
        whole_of.update({piece: path for piece in out if piece != path})
        return out

    base: list[Item] = []
    extras: list[Item] = []
    for wheel in wheels:
        key = wheel_name(wheel.name)
        for piece in pieces(wheel, "wheels"):
            (extras if key in optional else base).append(
                Item(key if key in optional else None, [piece], "wheel")
            )
    extras += [
        Item(d, [piece], "dataset")
        for d in DATASET_PATTERNS
        for f in compress_dataset(d, cache / "data")
        for piece in pieces(f, d)
    ]
    needs = {c: chapter_needs(chapter_sources(c, root)) for c in chapters()}
    demand = {
        key: sum(key in n for n in needs.values()) for key in [*OPTIONAL_WHEELS, *DATASET_PATTERNS]
    }
    parts = pack(base, extras, capacity, demand)
    where = chapter_parts(needs, parts)
    for folder in [root / KIT, *root.glob(f"{KIT}-*")]:
        for sub in ("wheels", "data"):
            shutil.rmtree(folder / sub, ignore_errors=True)
        (folder / "part.json").unlink(missing_ok=True)
    manifest: dict = {
        "python": PYTHON_VERSION,
        "platforms": list(PLATFORMS),
        "image_packages": sorted(image),
        "tree_bytes": tree,
        "commit": _head(root),
        "carry_limit_bytes": limit,
        "chapters": {c: {"needs": sorted(needs[c]), "part": where[c]} for c in needs},
        "base_parts": base_parts(parts),
        "parts": [],
    }
    for part in parts:
        folder = root / part.folder
        entry: dict = {"number": part.number, "folder": part.folder, "wheels": [], "data": {}}
        for item in part.items:
            for src in item.files:
                sub = "wheels" if item.kind == "wheel" else f"data/{item.key}"
                (folder / sub).mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, folder / sub / src.name)
                record: dict = {"file": f"{sub}/{src.name}", "sha256": sha256(src)}
                whole = whole_of.get(src, src)
                if whole != src:  # kit_pieces.assemble checks the joined file against it
                    record["whole"] = f"{sub}/{whole.name}"
                    record["whole_sha256"] = sha256(whole)
                if whole in original and original[whole] != whole:
                    record["recompressed_from_sha256"] = sha256(original[whole])
                if item.kind == "wheel":
                    record["modules"] = sorted(wheel_modules(whole))
                    record["optional"] = item.key is not None  # not every chapter needs it
                    entry["wheels"].append(record)
                else:
                    entry["data"].setdefault(item.key, []).append(record)
        entry["bytes"] = part.size
        entry["chapters"] = sorted(c for c, p in where.items() if p == part.number)
        manifest["parts"].append(entry)
        (folder / "part.json").write_text(json.dumps(entry, indent=1))
    shutil.copy2(root / RUN_SCRIPT, root / KIT / "run.sh")
    (root / KIT / "kit.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _head(root: Path) -> str:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
    )
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=root).returncode != 0
    return head.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def kit_bytes(root: Path, number: int) -> int:
    """The bytes a part's folder carries (each file as `carried_size`)."""
    folder = root / (KIT if number == 1 else f"{KIT}-{number}")
    return sum(carried_size(p.stat().st_size) for p in folder.rglob("*") if p.is_file())


def describe(manifest: dict, root: Path) -> str:
    lines = [
        f"working tree: {manifest['tree_bytes'] / 2**20:.1f} MiB; each device command carries "
        f"it and one part (limit {manifest['carry_limit_bytes'] / 2**20:.0f} MiB)"
    ]
    for part in manifest["parts"]:
        size = kit_bytes(root, part["number"])
        total = (size + manifest["tree_bytes"]) / 2**20
        data = ", ".join(part["data"]) or "no datasets"
        lines.append(
            f"part {part['number']} ({part['folder']}/): {size / 2**20:.1f} MiB "
            f"({len(part['wheels'])} wheels, {data}); with the tree {total:.1f} MiB; "
            f"runs {', '.join(part['chapters']) or 'no further chapter'}"
            + (
                " (it holds wheels every chapter needs: it installs them, the next part runs)"
                if part["number"] < manifest.get("base_parts", 1)
                else ""
            )
        )
        carry = f'carry ["{part["folder"]}"]'
        step = "bash gpu-kit/run.sh" + ("" if part["number"] == 1 else f" --part {part['number']}")
        lines.append(f"  on the device: {carry}, then: {step}")
    if len(manifest["parts"]) > 1:
        lines.append(
            "parts after the first reuse the first part's install: run them on the same warm "
            "machine, one after the other"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m implicit_bias.core.tools.gpu_kit")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the kit (gpu-kit/ and the parts beside it)")
    sub.add_parser("describe", help="print the built kit's parts and sizes")
    run = sub.add_parser("run", help="run the chapters the parts present make runnable")
    from .gpu_run import add_run_arguments, run_kit

    add_run_arguments(run)
    args = parser.parse_args(argv)
    root = project_root()
    if args.command == "run":
        return run_kit(args, root)
    if args.command == "describe":
        path = root / KIT / "kit.json"
        if not path.is_file():
            print(f"error: no kit built ({path} missing): run `make gpu-kit`", file=sys.stderr)
            return 2
        print(describe(json.loads(path.read_text()), root))
        return 0
    try:
        manifest = build(root)
    except (ValueError, subprocess.CalledProcessError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(describe(manifest, root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
