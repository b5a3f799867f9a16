"""requirements.lock, which `make setup` installs, pins every dependency of the package (and of
its test extra) at a version its specifier allows, and nothing else unpinned."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def pins(text: str) -> dict[str, Version]:
    found = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"not an exact pin: {line!r}"
        found[canonicalize_name(name)] = Version(version)
    return found


def unmet(requirements: list[str], locked: dict[str, Version]) -> list[str]:
    problems = []
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name == "torch":  # installed first, from TORCH_SPEC (CPU or CUDA build)
            continue
        if name not in locked:
            problems.append(f"{req.name}: not in requirements.lock")
        elif not req.specifier.contains(locked[name], prereleases=True):
            problems.append(f"{req.name}: locked {locked[name]} does not satisfy {req.specifier}")
    return problems


def test_the_lock_pins_every_dependency_within_its_specifier():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = project["dependencies"] + project["optional-dependencies"]["test"]
    locked = pins((ROOT / "requirements.lock").read_text())
    assert "torch" not in locked
    assert not unmet(required, locked), unmet(required, locked)


def test_the_lock_check_fails_on_a_missing_or_wrong_pin():
    locked = pins("numpy==2.4.6\n")
    assert unmet(["numpy>=2.5", "scipy>=1"], locked) == [
        "numpy: locked 2.4.6 does not satisfy >=2.5",
        "scipy: not in requirements.lock",
    ]


def _third_party_imports() -> set[str]:
    import ast
    import sys

    lib = ROOT / "lib" / "implicit_bias"
    names = set()
    for path in lib.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "implicit_bias"}


def _declared() -> set[str]:
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {Requirement(r).name.lower().replace("_", "-") for r in project["dependencies"]}


def test_every_import_of_the_library_is_declared():
    """An import that arrives only through another package (filelock through torch) breaks
    when that package changes: every distribution the library imports is in pyproject.toml."""
    from importlib.metadata import packages_distributions

    dists = packages_distributions()
    undeclared = {
        name: dists.get(name)
        for name in _third_party_imports()
        if not {d.lower().replace("_", "-") for d in dists.get(name, [name])} & _declared()
    }
    assert undeclared == {}


def test_every_declared_library_is_imported():
    """A pinned dependency that nothing imports is dead weight; the book's tools (Jupyter Book
    and its Sphinx stack, the kernel, the executors, dask for clusters) are used by command,
    not by import of the library."""
    from importlib.metadata import packages_distributions

    tools = {
        "jupyter-book",
        "sphinx",
        "myst-nb",
        "ipykernel",
        "nbformat",
        "papermill",
        "jupytext",
        "dask",
        "ecos",
        "clarabel",
        "osqp",  # solvers cvxpy loads by name
    }
    imported = set()
    dists = packages_distributions()
    for name in _third_party_imports():
        imported |= {d.lower().replace("_", "-") for d in dists.get(name, [name])}
    assert sorted(_declared() - imported - tools) == []
