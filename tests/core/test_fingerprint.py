"""Code fingerprints: any change to what executes changes them; comments, docstrings,
formatting and moving a function between modules do not."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from implicit_bias.core.engine import fingerprint as fp

HELPERS = '''
SCALE = 3.0


def helper(x):
    """Triple it."""
    return SCALE * x  # the scale
'''

TASK = """
from {package}.{helpers} import helper


def task(t):
    # a comment
    return {{"y": helper(t["x"]) + 1}}
"""


def make_package(root, name, helpers=HELPERS, task=None, helpers_module="helpers"):
    package = root / name
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / f"{helpers_module}.py").write_text(textwrap.dedent(helpers))
    (package / "tasks.py").write_text(
        textwrap.dedent(task or TASK.format(package=name, helpers=helpers_module))
    )
    return package


def fingerprint_of(root, name):
    """The task's fingerprint, computed in a fresh interpreter (as a later run would)."""
    code = (
        f"import sys; sys.path.insert(0, {str(root)!r}); "
        f"from implicit_bias.core.engine.fingerprint import fingerprint; "
        f"from {name}.tasks import task; print(fingerprint(task))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.fixture
def base(tmp_path):
    make_package(tmp_path / "base", "demo")
    return fingerprint_of(tmp_path / "base", "demo")


@pytest.mark.parametrize(
    "name,helpers,task",
    [
        (
            "comment and docstring",
            HELPERS.replace("# the scale", "# why: x3").replace("Triple it.", "Multiply by three."),
            None,
        ),
        (
            "formatting",
            HELPERS.replace("return SCALE * x", "return (SCALE *\n            x)"),
            None,
        ),
        ("task comment", None, TASK.replace("# a comment", "# another comment")),
    ],
)
def test_changes_that_do_not_execute_keep_the_fingerprint(tmp_path, base, name, helpers, task):
    root = tmp_path / "edit"
    make_package(
        root, "demo", helpers or HELPERS, (task or TASK).format(package="demo", helpers="helpers")
    )
    assert fingerprint_of(root, "demo") == base, name


def test_moving_a_function_to_another_module_keeps_the_fingerprint(tmp_path, base):
    root = tmp_path / "moved"
    make_package(root, "demo", helpers_module="numerics")
    assert fingerprint_of(root, "demo") == base


@pytest.mark.parametrize(
    "name,helpers,task",
    [
        ("helper arithmetic", HELPERS.replace("SCALE * x", "SCALE * x * x"), None),
        ("module constant", HELPERS.replace("SCALE = 3.0", "SCALE = 3.5"), None),
        ("task arithmetic", None, TASK.replace("+ 1", "+ 2")),
    ],
)
def test_changes_to_what_executes_change_the_fingerprint(tmp_path, base, name, helpers, task):
    root = tmp_path / "edit"
    make_package(
        root, "demo", helpers or HELPERS, (task or TASK).format(package="demo", helpers="helpers")
    )
    assert fingerprint_of(root, "demo") != base, name


def test_follows_local_imports_and_package_modules():
    from implicit_bias.chapters.gln_norm import tasks

    reached = fp.reached(tasks.svm_task)
    # gln_solvers is imported inside a function, load_mnist inside another
    assert "function svm_gln" in reached and "function load_mnist" in reached
    assert "value VAL_SEED" in reached


def test_a_real_task_function_is_stable_within_and_across_processes():
    from implicit_bias.chapters.tensor_networks import tasks as tensor_networks

    first = fp.fingerprint(tensor_networks.theorem6_task)
    fp.clear_cache()
    assert fp.fingerprint(tensor_networks.theorem6_task) == first
    code = (
        "from implicit_bias.core.engine.fingerprint import fingerprint; "
        "from implicit_bias.chapters.tensor_networks import tasks as t; "
        "print(fingerprint(t.theorem6_task))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == first


def test_a_walk_that_replays_shared_helpers_gives_each_function_its_own_walks_fingerprint():
    """The second function to reach a helper replays what the first walk saw of it (its text,
    its constants, what it reaches, in order): every task of a chapter walked in turn gets the
    fingerprint and the entries of a walk of its own, and the replays did happen."""
    from implicit_bias.chapters.gln_norm import tasks

    functions = [tasks.gd_task, tasks.relu_task, tasks.svm_task, tasks.authors_data_task]
    alone = []
    for function in functions:
        fp.clear_cache()
        alone.append((fp.fingerprint(function), fp.reached(function)))
    fp.clear_cache()
    in_turn = [(fp.fingerprint(function), fp.reached(function)) for function in functions]
    walked = len(fp._VISITS)
    fp.clear_cache()
    assert in_turn == alone
    assert all(len(entries) > 20 for _, entries in alone)
    assert 0 < walked < sum(len(entries) for _, entries in alone) / 2  # shared helpers once


def test_fingerprints_do_not_depend_on_where_the_checkout_is(tmp_path):
    """A clone elsewhere (CI) must see the committed results as fresh."""
    import shutil
    from pathlib import Path

    lib = Path(fp.__file__).resolve().parents[3]
    copy = tmp_path / "elsewhere" / "lib"
    shutil.copytree(
        lib / "implicit_bias", copy / "implicit_bias", ignore=shutil.ignore_patterns("__pycache__")
    )
    code = (
        "from implicit_bias.core.engine.fingerprint import fingerprint; "
        "from implicit_bias.chapters.gln_norm import tasks; print(fingerprint(tasks.gd_task))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "PYTHONPATH": str(copy)},
    )
    from implicit_bias.chapters.gln_norm import tasks

    assert out.stdout.strip() == fp.fingerprint(tasks.gd_task)


def test_a_source_edited_after_import_is_refused(tmp_path, monkeypatch):
    """The code that runs must be the code that is hashed: an edit after import (an open
    kernel) would otherwise label old results with the new code's fingerprint."""
    import implicit_bias
    from implicit_bias.chapters.tensor_networks import tasks as tensor_networks

    fp.clear_cache()
    monkeypatch.setattr(implicit_bias, "IMPORTED_AT", 0.0)  # as if imported before any edit
    with pytest.raises(fp.SourceChangedError, match="restart the kernel"):
        fp.fingerprint(tensor_networks.theorem6_task)
    fp.clear_cache()


def test_a_local_import_from_another_module_keeps_the_fingerprint(tmp_path, base):
    """Where a helper is imported from is not what executes: a function-level import of
    project code may name another module after a move."""
    local = """
def task(t):
    from {package}.{helpers} import helper
    return {{"y": helper(t["x"]) + 1}}
"""
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    make_package(root_a, "demo", task=local.format(package="demo", helpers="helpers"))
    make_package(
        root_b,
        "demo",
        helpers_module="numerics",
        task=local.format(package="demo", helpers="numerics"),
    )
    assert fingerprint_of(root_a, "demo") == fingerprint_of(root_b, "demo") == base


def test_the_task_declaration_is_transparent_but_other_decorators_count(tmp_path, base):
    declared = TASK.replace("def task(t):", "@task_decl(threads=1)\ndef task(t):").replace(
        "import helper",
        "import helper\nfrom implicit_bias.core.engine.tasks import task as task_decl",
    )
    root = tmp_path / "declared"
    make_package(root, "demo", task=declared.format(package="demo", helpers="helpers"))
    assert fingerprint_of(root, "demo") == base
    wrapped = TASK.replace("def task(t):", "@functools.lru_cache\ndef task(t):").replace(
        "import helper", "import helper\nimport functools"
    )
    root = tmp_path / "wrapped"
    make_package(root, "demo", task=wrapped.format(package="demo", helpers="helpers"))
    assert fingerprint_of(root, "demo") != base


def test_a_parameter_named_like_a_project_function_is_the_parameter(tmp_path, base):
    """`def task(t)` reads its parameter `t`, whatever the module also calls `t`."""
    shadowing = """
from {package}.{helpers} import helper
from implicit_bias.core.engine.tasks import task as t


def task(t):
    # `t` is the parameter, not the task declaration imported above
    return {{"y": helper(t["x"]) + 1}}
"""
    root = tmp_path / "shadow"
    make_package(root, "demo", task=shadowing.format(package="demo", helpers="helpers"))
    assert fingerprint_of(root, "demo") == base
