"""Code fingerprints: a hash of what a task function executes.

The fingerprint of a function covers the normalized source of the function and of every
function, class and module-level constant of the project that it reaches, followed through the
names its code uses (calls, attribute chains such as `gln_solvers.svm_gln`, default arguments,
decorators, closures). Normalization makes it depend on what runs and nothing else:

- the source is parsed and printed back (`ast.unparse`), so comments and formatting vanish;
- docstrings are dropped;
- a reference to a project function or class is replaced by its bare name, so moving it to
  another module (and importing it from there) changes no fingerprint, while any change to its
  body does, because the body is hashed in its own right;
- type annotations are dropped (they do not execute);
- import statements of project code inside a function are dropped: the names they bind are
  followed to what they name, so where a module lives is not part of what executes;
- a name is resolved in the module only where the function does not bind it itself (a
  parameter or local variable called like a project function is not that function);
- a decorator marked `__fingerprint_transparent__` (the task declaration of
  `implicit_bias.core.engine.tasks`, which returns the function itself) is dropped: it records how a
  task is scheduled (threads, device), not what it computes.

The printing is Python 3.11's on every version (`unparse`): from 3.12 on, `ast.unparse` quotes
an f-string whose expressions hold quotes differently (`f'{', '.join(x)}'` where 3.11 writes
`f"{', '.join(x)}"`), which changed the fingerprint of every task reaching one.

Like joblib's `Memory` (which hashes a function's source) and redun (which hashes a task's code
and, transitively, the tasks it calls), the hash is of source, not bytecode, so it does not
depend on the Python version's compiler. Code outside the project (numpy, torch, cvxpy) is not
followed: its versions are pinned in pyproject.toml.
"""

from __future__ import annotations

import ast
import enum
import functools
import hashlib
import inspect
import re
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = "implicit_bias"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_CHECKOUT = str(Path(__file__).resolve().parents[4])  # the repository holding lib/


class _Unparser311(ast._Unparser):  # type: ignore[name-defined,misc]
    """`ast.unparse` with f-strings quoted as Python 3.11 quotes them: the quote is chosen to
    avoid the quotes of every part, expressions included (3.12 looks at the literal parts only,
    as PEP 701 allows an expression to reuse the f-string's quote)."""

    def visit_JoinedStr(self, node):
        self.write("f")
        parts = []
        for value in node.values:
            with self.buffered() as buffer:
                self._write_fstring_inner(value)
            parts.append(("".join(buffer), isinstance(value, ast.Constant)))
        quote_types = list(ast._ALL_QUOTES)  # type: ignore[attr-defined]
        written = []
        for value, is_constant in parts:
            escaped, narrowed = self._str_literal_helper(
                value, quote_types=quote_types, escape_special_whitespace=is_constant
            )
            if set(narrowed).isdisjoint(quote_types):  # no common quote: 3.11's repr fallback
                quote_types = ["'''"]
                written = [repr('"' + v)[2:-1] for v, _ in parts]
                break
            quote_types = narrowed
            written.append(escaped)
        self.write(f"{quote_types[0]}{''.join(written)}{quote_types[0]}")


def unparse(tree: ast.AST) -> str:
    """`ast.unparse`, printing f-strings as Python 3.11 does on every Python version."""
    if sys.version_info < (3, 12) or not hasattr(ast, "_Unparser"):
        return ast.unparse(tree)
    return _Unparser311().visit(tree)


def _in_project(obj, roots: tuple[str, ...]) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return any(module == r or module.startswith(r + ".") for r in roots)


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]


def _strip_annotations(tree: ast.AST) -> None:
    """Type annotations do not execute: drop those of parameters and return values, and keep
    of an annotated assignment (a dataclass field) only that it is one, unless it is a
    ClassVar or InitVar, which decide whether it is a field."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
            args = node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                if arg is not None:
                    arg.annotation = None
        elif isinstance(node, ast.AnnAssign):
            text = ast.unparse(node.annotation)
            if "ClassVar" not in text and "InitVar" not in text:
                node.annotation = ast.Constant(value="annotation")


class _ProjectImportStripper(ast.NodeTransformer):
    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots

    def _project(self, module: str) -> bool:
        return any(module == r or module.startswith(r + ".") for r in self.roots)

    def visit_Import(self, node: ast.Import):
        return None if all(self._project(a.name) for a in node.names) else node

    def visit_ImportFrom(self, node: ast.ImportFrom):
        return None if node.level or self._project(node.module or "") else node


def _strip_project_imports(tree: ast.AST, roots: tuple[str, ...]) -> None:
    _ProjectImportStripper(roots).visit(tree)
    for node in ast.walk(tree):  # a body left empty by the removal
        body = getattr(node, "body", None)
        if isinstance(body, list) and not body:
            node.body = [ast.Pass()]  # type: ignore[attr-defined]


def _strip_transparent_decorators(tree: ast.AST, namespace: dict) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.decorator_list = [d for d in node.decorator_list if not _transparent(d, namespace)]


def _transparent(decorator: ast.AST, namespace: dict) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    parts = _dotted(target)
    if not parts or parts[0] not in namespace:
        return False
    obj = namespace[parts[0]]
    for attr in parts[1:]:
        obj = getattr(obj, attr, None)
    return bool(getattr(obj, "__fingerprint_transparent__", False))


def _dotted(node: ast.AST) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None for anything that is not a plain name chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


# What visiting a function or class did, by (roots, id): the object (kept, so that its id is not
# reused) and its steps in order: (referenced object,) or (label, text, overwrite). A
# visit's steps do not depend on what the walk has seen, so another function's walk that reaches
# the same object replays them instead of parsing and rewriting its source again (the book's
# task functions share most of their helpers: 915 visits of 360 objects for the 40 smoke-cached
# ones), with the same entries in the same order as a walk of its own.
_VISITS: dict[tuple[tuple[str, ...], int], tuple[Any, list[tuple]]] = {}


class _Collector:
    """Walks the project code reachable from one function; `entries` maps a label to the
    normalized text of each function, class and constant reached."""

    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots
        self.entries: dict[str, str] = {}
        self.seen: set[int] = set()
        self._steps: list[list[tuple]] = []  # the steps of the visits under way, innermost last

    def _enter(self, label: str, text: str, overwrite: bool = True) -> None:
        if overwrite:
            self.entries[label] = text
        else:
            self.entries.setdefault(label, text)
        if self._steps:
            self._steps[-1].append((label, text, overwrite))

    # -- objects ------------------------------------------------------------------------------
    def visit(self, obj) -> None:
        if self._steps:
            self._steps[-1].append((obj,))
        self._visit(obj)

    def _visit(self, obj) -> None:
        obj = _unwrapped(obj)
        if id(obj) in self.seen:
            return
        self.seen.add(id(obj))
        if isinstance(obj, functools.partial):
            self._visit(obj.func)
            return
        if not isinstance(obj, (types.FunctionType, type)):
            return
        done = _VISITS.get((self.roots, id(obj)))
        self._steps.append([])  # a replay's steps are not the enclosing visit's: thrown away
        try:
            if done is not None and done[0] is obj:
                self._replay(obj, done[1])
                return
            self._visit_code(obj)
        finally:
            steps = self._steps.pop()
        _VISITS[self.roots, id(obj)] = (obj, steps)

    def _replay(self, obj, steps: list[tuple]) -> None:
        _check_unchanged_since_import(obj)
        for step in steps:
            if len(step) == 1:
                self.visit(step[0])
            else:
                self._enter(*step)

    def _visit_code(self, obj) -> None:
        name = obj.__qualname__
        _check_unchanged_since_import(obj)
        try:
            source = textwrap.dedent(inspect.getsource(obj))
            tree = ast.parse(source)
        except (OSError, TypeError, SyntaxError):  # no source (built in a REPL): its name only
            self._enter(f"{name} (no source)", name)
            return
        namespace = dict(vars(sys.modules[obj.__module__])) if obj.__module__ in sys.modules else {}
        if isinstance(obj, types.FunctionType):
            namespace.update(obj.__globals__)
            if obj.__closure__:
                namespace.update(
                    {
                        var: cell.cell_contents
                        for var, cell in zip(obj.__code__.co_freevars, obj.__closure__)
                        if _cell_filled(cell)
                    }
                )
        namespace.update(_local_imports(tree, obj.__module__))
        _strip_docstrings(tree)
        _strip_annotations(tree)
        _strip_project_imports(tree, self.roots)
        _strip_transparent_decorators(tree, namespace)
        tree = _Rewriter(self, namespace).visit(tree)
        self._enter(f"{type(obj).__name__} {name}", unparse(tree))

    # -- values referenced by name --------------------------------------------------------------
    def describe(self, value, depth: int = 0) -> str:
        """A stable text for a referenced value; project functions and classes are visited and
        stand for themselves by name."""
        if depth > 6:
            return "..."
        if isinstance(value, str):  # a path inside the checkout is the same in every clone
            return repr(value.replace(_CHECKOUT, "<checkout>"))
        if value is None or isinstance(value, (bool, int, float, complex, bytes)):
            return repr(value)
        if isinstance(value, enum.Enum):
            return f"{type(value).__qualname__}.{value.name}"
        if isinstance(_unwrapped(value), (types.FunctionType, type, functools.partial)):
            if _in_project(_unwrapped(value), self.roots):
                self.visit(value)
                return getattr(value, "__qualname__", type(value).__qualname__)
            return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
        if isinstance(value, types.ModuleType):
            return value.__name__
        if isinstance(value, (list, tuple)):
            inner = ", ".join(self.describe(v, depth + 1) for v in value)
            return f"{type(value).__name__}[{inner}]"
        if isinstance(value, (set, frozenset)):
            return "set{" + ", ".join(sorted(self.describe(v, depth + 1) for v in value)) + "}"
        if isinstance(value, dict):
            items = sorted(
                (self.describe(k, depth + 1), self.describe(v, depth + 1)) for k, v in value.items()
            )
            return "dict{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
        array = _as_array(value)
        if array is not None:
            digest = hashlib.sha256(array.tobytes()).hexdigest()[:16]
            return f"array{array.shape}{array.dtype}:{digest}"
        if type(value).__repr__ is object.__repr__:
            return type(value).__qualname__
        return _ADDRESS.sub("", repr(value)).replace(_CHECKOUT, "<checkout>")


class SourceChangedError(RuntimeError):
    """A project source file changed after this process imported it."""


def _check_unchanged_since_import(obj) -> None:
    """The fingerprint is read from the source files; if one changed after the package was
    imported, the code that runs may not be the code on disk, and a result would be labelled
    with the wrong fingerprint. Refuse, rather than cache such a result."""
    import os

    from ... import IMPORTED_AT

    if not _in_project(obj, (PACKAGE,)):
        return
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        return
    if path and os.path.getmtime(path) > IMPORTED_AT:
        raise SourceChangedError(
            f"{path.rsplit('/', 1)[-1]} changed after this process imported it: restart the "
            "kernel (or rerun the command) so that the code that runs is the code on disk"
        )


def _local_imports(tree: ast.AST, module: str) -> dict:
    """Names bound by import statements inside the code (`from implicit_bias.core.engine.data import
    load_mnist` in a function body), resolved as Python would."""
    import importlib

    package = module.rpartition(".")[0]
    bound = {}
    for node in ast.walk(tree):
        try:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.partition(".")[0]
                    target = alias.name if alias.asname else top
                    bound[alias.asname or top] = importlib.import_module(target)
            elif isinstance(node, ast.ImportFrom):
                base = (
                    importlib.import_module("." * node.level + (node.module or ""), package)
                    if node.level
                    else importlib.import_module(node.module or "")
                )
                for alias in node.names:
                    value = getattr(base, alias.name, None)
                    if value is None:
                        value = importlib.import_module(f"{base.__name__}.{alias.name}")
                    bound[alias.asname or alias.name] = value
        except ImportError:
            continue
    return bound


def _unwrapped(obj):
    """The function under decorators that keep `__wrapped__` (functools.wraps, lru_cache)."""
    try:
        return inspect.unwrap(obj) if callable(obj) else obj
    except ValueError:  # a cycle of __wrapped__
        return obj


def _cell_filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises ValueError
    except ValueError:
        return False
    return True


def _as_array(value):
    module = type(value).__module__
    if module.startswith("numpy") and hasattr(value, "tobytes"):
        return value
    if module.startswith("torch") and hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return None


def _local_names(function: ast.AST) -> set[str]:
    """The parameters of a function (or lambda) and every name bound inside it (assignments,
    loop and comprehension targets, `with ... as`, nested definitions)."""
    args = function.args  # type: ignore[attr-defined]
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    body = function.body if isinstance(function.body, list) else [function.body]  # type: ignore[attr-defined]
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
    return names


class _Rewriter(ast.NodeTransformer):
    """Replaces references to project functions and classes by their bare names, visiting
    each; records the module-level constants that the code reads."""

    def __init__(self, collector: _Collector, namespace: dict):
        self.collector = collector
        self.namespace = namespace
        self.scopes: list[set[str]] = []  # names local to the enclosing functions

    def _local(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes)

    def _visit_scope(self, node):
        """A function's parameters and the names it assigns are its own: `task["n"]` in
        `def f(task)` is the parameter, not a project function that happens to be called
        `task`."""
        self.scopes.append(_local_names(node))
        try:
            return self.generic_visit(node)
        finally:
            self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_scope

    def _resolve(self, parts: list[str]):
        if parts[0] not in self.namespace:
            return None, 0
        obj = self.namespace[parts[0]]
        used = 1
        for attr in parts[1:]:
            if not isinstance(obj, types.ModuleType) or not hasattr(obj, attr):
                break
            obj = getattr(obj, attr)
            used += 1
        return obj, used

    def _reference(self, node: ast.AST):
        parts = _dotted(node)
        if parts is None or (parts[0].startswith("__") and parts[0].endswith("__")):
            return None  # __file__, __name__: where the code lives, not what it computes
        if self._local(parts[0]):
            return None  # a parameter or local variable, whatever the module also names so
        obj, used = self._resolve(parts)
        if (
            used == 0
            or used < len(parts)
            and not isinstance(_unwrapped(obj), (type, types.FunctionType))
        ):
            return None
        roots = self.collector.roots
        if isinstance(obj, types.ModuleType):
            return None
        target = _unwrapped(obj)
        if isinstance(target, (types.FunctionType, type, functools.partial)):
            if not _in_project(target, roots):
                return None
            self.collector.visit(obj)
            name: ast.expr = ast.Name(id=getattr(target, "__qualname__", "partial"), ctx=ast.Load())
            for attr in parts[used:]:  # e.g. a class attribute: Class.method
                name = ast.Attribute(value=name, attr=attr, ctx=ast.Load())
            return name
        # a module-level value of the project: its value is part of what executes
        holder = self.namespace.get(parts[0])
        owner = holder if isinstance(holder, types.ModuleType) else None
        owner_name = owner.__name__ if owner is not None else None
        if used == len(parts) and (owner_name is None or owner_name.startswith(roots)):
            label = ".".join(parts)
            self.collector._enter(f"value {label}", self.collector.describe(obj), overwrite=False)
        return None

    def visit_Name(self, node: ast.Name):
        if isinstance(node.ctx, ast.Load):
            replaced = self._reference(node)
            if replaced is not None:
                return ast.copy_location(replaced, node)
        return node

    def visit_Attribute(self, node: ast.Attribute):
        if isinstance(node.ctx, ast.Load) and _dotted(node) is not None:
            replaced = self._reference(node)
            if replaced is not None:
                return ast.copy_location(replaced, node)
            root = (_dotted(node) or [""])[0]
            holder = self.namespace.get(root)
            if isinstance(holder, types.ModuleType) and not holder.__name__.startswith(
                self.collector.roots
            ):
                return node  # numpy.linalg.norm and the like: leave as written
        return self.generic_visit(node)


@functools.cache
def _fingerprint_cached(module: str, qualname: str) -> str:
    fn: Any = sys.modules[module]
    for part in qualname.split("."):
        fn = getattr(fn, part)
    return _compute(fn)


def _roots(fn: Callable) -> tuple[str, ...]:
    """The project's packages: this one, and the top-level package of a task function
    defined elsewhere (a test's or a user's module)."""
    top = fn.__module__.partition(".")[0]
    return (PACKAGE,) if top == PACKAGE else (PACKAGE, top)


def _compute(fn: Callable) -> str:
    collector = _Collector(_roots(fn))
    collector.visit(fn)
    text = "\n\n".join(f"# {label}\n{body}" for label, body in sorted(collector.entries.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint(fn: Callable) -> str:
    """The fingerprint (sha256 hex) of `fn` and all project code it reaches; cached per
    process. `fn` must be a module-level function (as sweep tasks are)."""
    module, qualname = fn.__module__, fn.__qualname__
    if "<locals>" in qualname or module not in sys.modules:
        return _compute(fn)
    return _fingerprint_cached(module, qualname)


def reached(fn: Callable) -> dict[str, str]:
    """What the fingerprint of `fn` covers: label -> normalized text (for inspection)."""
    collector = _Collector(_roots(fn))
    collector.visit(fn)
    return dict(sorted(collector.entries.items()))


def clear_cache() -> None:
    _fingerprint_cached.cache_clear()
    _VISITS.clear()
