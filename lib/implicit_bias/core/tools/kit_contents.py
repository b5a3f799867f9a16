"""What the offline GPU kit holds and what each chapter needs from it: the names shared by the
kit's builder (`gpu_kit`, on a machine with internet) and its runner on the device (`gpu_run`),
so that neither imports the other's module for them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ..engine.paths import project_root

KIT = "gpu-kit"  # part 1 and the entry point; part N > 1 is `gpu-kit-N`
WORK = ".gpu-kit-work"  # the run's scratch: installed parts, datasets, results (run.sh)
# Wheels that only some chapters need, with the pattern that marks a chapter as needing them
# (None: no chapter does). Every other wheel is needed by all and goes into part 1.
# sparsediffpy: cvxpy's nonlinear-programming engine (cvxpy requires it; imported only by its
# NLP solvers). scs: the SCS solver (cvxpy requires it; imported when a program names SCS).
OPTIONAL_WHEELS: dict[str, str | None] = {"scs": r"\bSCS\b", "sparsediffpy": None}
DATASET_PATTERNS = {
    "mnist": r"(?<!fashion_)\bmnist\b|load_mnist",
    "fashion_mnist": r"\bfashion_mnist\b|load_fashion_mnist",
}
# What the website toolchain (WEBSITE_ONLY, not in the kit) provides: code that imports it runs
# when the website builds (a Sphinx extension), never in a chapter run.
WEBSITE_MODULES = (
    "sphinx",
    "docutils",
    "myst_nb",
    "myst_parser",
    "jupyter_book",
    "sphinx_book_theme",
    "pydata_sphinx_theme",
)
# Modules a run needs that no source imports: papermill starts the kernel by name, and cvxpy
# imports the solvers the chapters name (ECOS, Clarabel, OSQP) when a program asks for them.
RUNTIME_MODULES = ("ipykernel", "ipykernel_launcher", "ecos", "clarabel", "osqp")


def normalize(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(filename: str) -> str:
    return normalize(filename.split("-")[0])


def third_party_imports(root: Path | None = None) -> set[str]:
    """Top-level modules outside the standard library that the library and the notebooks
    import (anywhere in a file, function-level imports included), plus RUNTIME_MODULES."""
    import ast

    root = root or project_root()
    sources = [p.read_text() for p in sorted((root / "lib" / "implicit_bias").rglob("*.py"))]
    for notebook in sorted((root / "notebooks").glob("*.md")):
        cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", notebook.read_text(), re.S)
        sources += [
            "\n".join(line for line in c.splitlines() if not line.startswith(("%", "!")))
            for c in cells
        ]
    found = set(RUNTIME_MODULES)
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    return {
        m
        for m in found
        if m not in sys.stdlib_module_names
        and m not in ("implicit_bias", "__future__")
        and m not in WEBSITE_MODULES
    }


def chapter_sources(chapter: str, root: Path | None = None) -> str:
    """The text that says what a chapter uses: its package, its own model module (named after
    it), its profiles and its notebook."""
    root = root or project_root()
    lib = root / "lib" / "implicit_bias"
    paths = sorted((lib / "chapters" / chapter).rglob("*.py"))
    paths += [
        lib / "models" / f"{chapter}.py",
        root / "data" / "profiles" / f"{chapter}.yaml",
        root / "notebooks" / f"{chapter}.md",
    ]
    return "\n".join(p.read_text() for p in paths if p.is_file())


def chapter_needs(source: str) -> set[str]:
    """The datasets and optional wheels a chapter's source names (see DATASET_PATTERNS and
    OPTIONAL_WHEELS)."""
    needs = {name for name, pattern in DATASET_PATTERNS.items() if re.search(pattern, source)}
    needs |= {
        name
        for name, pattern in OPTIONAL_WHEELS.items()
        if pattern is not None and re.search(pattern, source)
    }
    return needs
