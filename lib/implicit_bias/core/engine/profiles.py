"""Profiles and their JSON Schema validation, before a run computes anything.

`PROFILES` names the two profiles every chapter has. The schemas are YAML documents (JSON
Schema, draft 2020-12) under `data/schemas/`:

- `profiles.yaml`: any profiles file, `data/profiles/<chapter>.yaml` (exactly `smoke` and
  `paper`, and the keys reserved in every chapter: `description`, `workers`);
- `profiles/<chapter>.yaml`: the parameters of one chapter, applied to each of its profiles;
- `claims.yaml`: a claims file, validated by `implicit_bias.core.verdicts.schema` with the
  machinery of this module (the validator and the readable messages below).

A custom profile (a profile changed by `--set`, or read from a profile file; see
`implicit_bias.core.engine.overrides`) is checked by `validate_profile` against the same two
schemas.

A file that does not validate raises `ProfileError` (or, for claims, `ClaimsError`) listing
every problem of the file at once, sorted by where it is, one line each: the file's name, the
key path (e.g. `paper.seeds[2]`), what was found and what is allowed, in the schema's words.
What a schema cannot express is checked here in code: smoke and paper have the same keys.
"""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import math
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, ValidationError, validators

from .paths import project_root

PROFILES = ("smoke", "paper")
RESERVED_PROFILE_KEYS = ("description", "workers")
_REPOSITORY_SCHEMAS = Path(__file__).resolve().parents[4] / "data" / "schemas"


class ProfileError(ValueError):
    """A profile name or profiles file is invalid."""


# --------------------------------------------------------------------------------------------
# Schemas: where they are, reading them, the validator
# --------------------------------------------------------------------------------------------


def _is_integer(checker, instance) -> bool:
    """Integers only: JSON Schema would also accept 3.0 (and YAML reads `3.0` as a float)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _finite_bound(keyword: str):
    """JSON Schema's `keyword` (minimum, maximum, ...), which a NaN passes (every comparison
    with it is false) and infinity passes one way: a bounded number must be finite."""
    check = Draft202012Validator.VALIDATORS[keyword]

    def bounded(validator, bound, instance, schema):
        if isinstance(instance, float) and not math.isfinite(instance):
            yield ValidationError(f"{instance!r} is not a finite number", validator_value=bound)
            return
        yield from check(validator, bound, instance, schema)

    return bounded


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")

Validator = validators.extend(
    Draft202012Validator,
    validators={keyword: _finite_bound(keyword) for keyword in _BOUNDS},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


def _is_finite_number(checker, instance) -> bool:
    """A profile's numbers are finite: a NaN or infinity given by `--set` (`.nan`, `[.inf]`)
    for a number without bounds (a log10 grid, a list of step sizes) passed the schema, and
    the run failed late."""
    return Draft202012Validator.TYPE_CHECKER.is_type(instance, "number") and not (
        isinstance(instance, float) and not math.isfinite(instance)
    )


# Profiles (the files and a run's custom profile): every number finite, wherever it sits. The
# claims and seed-plan schemas keep JSON Schema's numbers (a seed plan records NaN as "none").
ProfileValidator = validators.extend(
    Validator, type_checker=Validator.TYPE_CHECKER.redefine("number", _is_finite_number)
)
PROFILE_SCHEMAS = ("profiles.yaml",)

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """A YAML file's data (the C loader where available: same results, ten times faster)."""
    return yaml.load(path.read_bytes(), Loader=_Loader)


def yaml_problem(path: Path, err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{path.name}: not valid YAML{where}: {getattr(err, 'problem', None) or err}"


def schemas_dir() -> Path:
    """`data/schemas/` of the project; for a project without one (such as the tests' demo
    project), the schemas of the repository this package comes from."""
    own = project_root() / "data" / "schemas"
    return own if own.is_dir() or not _REPOSITORY_SCHEMAS.is_dir() else _REPOSITORY_SCHEMAS


def parameter_schema(chapter: str) -> Path:
    """Where the chapter's parameter schema belongs: `data/schemas/profiles/<chapter>.yaml`."""
    return project_root() / "data" / "schemas" / "profiles" / f"{chapter}.yaml"


@functools.lru_cache(maxsize=32)
def _validator(path: str, mtime_ns: int, variant: str = "") -> Any:
    """A validator for the schema file at `path`, its local `$ref`s inlined (resolving them
    through `referencing` at every use took a third of the time); `variant="parameters"`: a
    chapter's parameter schema, accepting the reserved keys (the file schema checks them);
    `variant="profile"`: one profile's part of the profiles-file schema."""
    schema = read_yaml(Path(path))
    if variant == "profile":
        schema = {"$ref": "#/$defs/profile", "$defs": schema.get("$defs", {})}
    if variant == "parameters":
        props = schema.get("properties", {})
        clash = [k for k in RESERVED_PROFILE_KEYS if k in props]
        if clash:
            raise ProfileError(
                f"{Path(path).name}: a chapter's parameter schema must not define "
                f"the reserved keys {clash} (data/schemas/profiles.yaml does)"
            )
        schema = {**schema, "properties": {**props, **dict.fromkeys(RESERVED_PROFILE_KEYS, True)}}
    strict = variant in ("profile", "parameters") or Path(path).name in PROFILE_SCHEMAS
    return (ProfileValidator if strict else Validator)(_inline_refs(schema, schema))


def _validator_for(path: Path, variant: str = "") -> Any:
    return _validator(str(path), path.stat().st_mtime_ns, variant)


def _inline_refs(node: Any, root: dict) -> Any:
    if isinstance(node, dict):
        node = _resolve(node, root)
        return {k: _inline_refs(v, root) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, root) for v in node]
    return node


# ---- reading a file once: parsed and validated data, cached by content ----------------------

_LOADED: dict[tuple, Any] = {}


def _load_validated(path: Path, error_class, validate, stamp: tuple) -> Any:
    """The data of the YAML file `path`, checked by `validate(data, path)`; a copy of what an
    earlier call returned for the same content and schemas (`stamp`)."""
    raw = path.read_bytes()
    key = (str(path), hashlib.sha256(raw).hexdigest(), stamp)
    if key not in _LOADED:
        try:
            data = yaml.load(raw, Loader=_Loader)
        except yaml.YAMLError as err:
            raise error_class(yaml_problem(path, err)) from None
        validate(data, path)
        if len(_LOADED) > 64:
            _LOADED.clear()
        _LOADED[key] = data
    return copy.deepcopy(_LOADED[key])


def _stamp(*paths: Path) -> tuple:
    return tuple(p.stat().st_mtime_ns if p.exists() else None for p in paths)


def load_profiles_file(path: Path, chapter: str) -> dict:
    """A profiles file's data, validated (`validate_profiles`); raises `ProfileError`."""
    stamp = (
        chapter,
        str(project_root()),
        *_stamp(
            schemas_dir() / "profiles.yaml",
            parameter_schema(chapter),
            project_root() / "data" / "schemas",
        ),
    )
    return _load_validated(
        path, ProfileError, lambda data, where: validate_profiles(data, where, chapter), stamp
    )


# --------------------------------------------------------------------------------------------
# Validation entry points
# --------------------------------------------------------------------------------------------


def validate_profiles(data: Any, path: Path, chapter: str) -> None:
    """Check a profiles file's data (`path` names the file in messages) against the generic file
    schema and the chapter's parameter schema; raise `ProfileError` listing every problem."""
    problems = _schema_problems(_validator_for(schemas_dir() / "profiles.yaml"), data)
    own = project_root() / "data" / "schemas"
    params = parameter_schema(chapter)
    if params.exists():
        checker = _validator_for(params, "parameters")
        for name in ("smoke", "paper"):
            if isinstance(data, dict) and isinstance(data.get(name), dict):
                problems += [
                    ((name, *where), text) for where, text in _schema_problems(checker, data[name])
                ]
    elif own.is_dir():  # a project with schemas of its own needs one for every chapter
        raise ProfileError(
            f"{path.name}: no parameter schema for chapter {chapter!r}: create "
            f"data/schemas/profiles/{chapter}.yaml (every key of the chapter's profiles with its "
            "type, range and description; see data/schemas/profiles/gln_norm.yaml)"
        )
    if isinstance(data, dict) and all(isinstance(data.get(p), dict) for p in ("smoke", "paper")):
        differ = sorted(set(data["smoke"]) ^ set(data["paper"]))
        if differ:
            problems.append(((), f"smoke and paper must have the same keys; differ in {differ}"))
    _raise(ProfileError, path, problems, lambda where: _dotted(where) or "top level")


def validate_profile(config: Any, chapter: str, profile: str, source: str) -> None:
    """Check one profile's parameters (a custom profile: changed by `--set` or read from a profile
    file) against the profile part of the file schema and the chapter's parameter schema; raise
    `ProfileError` listing every problem, each line starting with `source` (what was asked for)
    and the key path (`paper.seeds`)."""
    problems = _schema_problems(_validator_for(schemas_dir() / "profiles.yaml", "profile"), config)
    params = parameter_schema(chapter)
    if params.exists():
        problems += _schema_problems(_validator_for(params, "parameters"), config)
    elif (project_root() / "data" / "schemas").is_dir():
        raise ProfileError(
            f"{source}: no parameter schema for chapter {chapter!r}: create "
            f"data/schemas/profiles/{chapter}.yaml"
        )
    _raise(ProfileError, source, problems, lambda where: _dotted((profile, *where)))


# --------------------------------------------------------------------------------------------
# Turning jsonschema's errors into one readable line each: (key path, text)
# --------------------------------------------------------------------------------------------


def _raise(error_class, path: Path | str, problems: list[tuple[tuple, str]], where) -> None:
    if not problems:
        return
    problems = sorted(problems, key=lambda p: (_sort_key(p[0]), p[1]))
    name = path.name if isinstance(path, Path) else path
    lines = [f"{name}: {where(at)}: {text}" for at, text in problems]
    error = error_class("\n".join(lines))
    error.messages = lines
    raise error


def _sort_key(path: tuple) -> tuple:
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, str(part)) for part in path)


def _schema_problems(validator, data: Any) -> list[tuple[tuple, str]]:
    """(key path, text) for every error of `data`; a `oneOf` resolved to the branch the value's
    type fits; the missing keys of one mapping in one line."""
    root = validator.schema
    out: list[tuple[tuple, str]] = []
    missing: dict[tuple, tuple[dict, list[str]]] = {}
    for top in validator.iter_errors(data):
        for error in _leaf_errors(top, root):
            where = tuple(error.absolute_path)
            if error.validator == "required":
                keys = missing.setdefault(where, (error.schema, []))[1]
                keys += [
                    k
                    for k in error.validator_value
                    if isinstance(error.instance, dict)
                    and k not in error.instance
                    and k not in keys
                ]
            else:
                out.append((where, _problem(error, root)))
    for where, (node, keys) in missing.items():
        props = node.get("properties", {})
        wanted = "; ".join(
            _allowed((*where, k), root, props.get(k, {}), use_path=False) for k in keys
        )
        out.append((where, f"missing keys {keys}; {wanted}"))
    return out


def _leaf_errors(error, root: dict) -> list:
    if error.validator in ("oneOf", "anyOf") and error.context:
        fitting = [
            i
            for i, branch in enumerate(error.validator_value)
            if _fits_type(branch, error.instance, root)
        ]
        if len(fitting) == 1:
            sub = [e for e in error.context if e.relative_schema_path[0] == fitting[0]]
            if sub:
                return [leaf for e in sub for leaf in _leaf_errors(e, root)]
    return [error]


def _problem(error, root: dict) -> str:
    """What is wrong with the value at the error's path, and what is allowed there."""
    where, value, kind = tuple(error.absolute_path), error.instance, error.validator
    if kind == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        extra = sorted(k for k in value if k not in allowed) if isinstance(value, dict) else []
        hints = [
            f"{k!r}: did you mean {close[0]!r}?"
            for k in extra
            if (close := difflib.get_close_matches(str(k), allowed, n=1))
        ]
        hint = f" ({'; '.join(hints)})" if hints else ""
        return f"unknown keys {extra}{hint}; allowed keys: {', '.join(allowed)}"
    if kind in ("enum", "const"):
        found = f"unknown {_label(where, _node(root, where), plain=True)} {_show(value)}"
    elif kind == "pattern":
        found = f"cannot read {value!r}"
    elif kind == "uniqueItems":
        seen: list = []
        repeated = []
        for x in value:
            if x in seen:
                repeated.append(x)
            seen.append(x)
        found = f"repeated entries {repeated}"
    elif kind in ("minItems", "maxItems", "items", "prefixItems") and isinstance(value, list):
        found = f"got {_count(value)}"
    elif kind == "minLength":
        found = "got an empty string"
    else:
        found = f"got {_show(value)}"
    return f"{found}; {_allowed(where, root, error.schema)}"


def _allowed(where: tuple, root: dict, fallback: dict | None = None, use_path: bool = True) -> str:
    """'<key> must be <words> - <description>' for the value at `where` (described by the
    schema node found along `where`, else by `fallback`)."""
    node = (_node(root, where) if use_path else None) or _resolve(fallback or {}, root)
    text = f"{_label(where, node)} must be {_words(node, root)}"
    description = node.get("description") if isinstance(node, dict) else None
    if description and not _words_are_description(node):
        text += f" - {description}"
    return text


def _label(where: tuple, node: Any = None, plain: bool = False) -> str:
    """How a message names the value at `where`: its key, the title of a tuple's item (`gate`
    of `[m, d, k, gate]`), or an entry of the nearest named list."""
    if not where:
        return "the file"
    if isinstance(where[-1], str):
        return where[-1]
    if isinstance(node, dict) and node.get("title"):
        return node["title"]
    parent = next((p for p in reversed(where[:-1]) if isinstance(p, str)), None)
    if parent is None:
        return "claim" if plain else "each claim"
    return f"{parent} entry" if plain else f"each entry of {parent}"


def _dotted(where) -> str:
    text = ""
    for part in where:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _count(value: list) -> str:
    return "an empty list" if not value else f"{len(value)} item{'s' * (len(value) != 1)}"


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return f"a list ({_count(value)})"
    if not isinstance(value, str):
        return repr(value)
    text = repr(value) if len(value) <= 60 else repr(value[:57] + "...")
    if value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
        return f"the string {text} (a boolean is written true or false, without quotes)"
    try:
        float(value)
    except ValueError:
        return text
    if "e" in value.lower():
        return f"the string {text} (YAML reads 1e-7 as text: write 1.0e-7)"
    return f"the string {text} (a number is written without quotes)"


# ---- the schema's words ---------------------------------------------------------------------


def _node(root: dict, where: tuple) -> dict | None:
    """The schema node describing the value at `where` (with `$ref` siblings such as a
    `description` kept), or None where the schema does not say."""
    node: Any = _resolve(root, root)
    for part in where:
        if not isinstance(node, dict):
            return None
        node = _container_branch(node, root, "object" if isinstance(part, str) else "array")
        if isinstance(part, str):
            node = node.get("properties", {}).get(part)
        else:
            prefix = node.get("prefixItems", [])
            node = prefix[part] if part < len(prefix) else node.get("items")
        node = _resolve(node, root)
    return node if isinstance(node, dict) else None


def _container_branch(node: dict, root: dict, kind: str) -> dict:
    for key in ("oneOf", "anyOf"):
        for branch in node.get(key, []):
            branch = _resolve(branch, root)
            if isinstance(branch, dict) and branch.get("type") == kind:
                return branch
    return node


def _resolve(node: Any, root: dict) -> Any:
    """A node with its local `$ref` (`#/$defs/...`) merged in; the node's own keys win."""
    if not isinstance(node, dict) or "$ref" not in node:
        return node
    target: Any = root
    for part in node["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    return {**_resolve(target, root), **{k: v for k, v in node.items() if k != "$ref"}}


_JSON_TYPES = {
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _fits_type(branch: Any, value: Any, root: dict) -> bool:
    """Whether `value` has a type that `branch` allows (so that its errors are the ones to show)."""
    branch = _resolve(branch, root)
    if not isinstance(branch, dict):
        return True
    if "type" in branch:
        types = branch["type"] if isinstance(branch["type"], list) else [branch["type"]]
        return any(
            isinstance(value, _JSON_TYPES[t])
            and not (isinstance(value, bool) and t in ("integer", "number"))
            for t in types
        )
    options = [branch["const"]] if "const" in branch else branch.get("enum")
    if options is not None:
        return any(type(value) is type(option) for option in options)
    return True


def _words_are_description(node: dict) -> bool:
    return node.get("type") == "string" and "pattern" in node and "description" in node


def _lit(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


def _words(node: Any, root: dict) -> str:
    """What a schema node allows, in words: "a positive integer or 'auto'", "a non-empty list
    of distinct entries, each a non-negative integer", "one of 'smoke', 'paper'", ..."""
    node = _resolve(node, root)
    if node is True or node == {}:
        return "anything"
    if node is False or not isinstance(node, dict):
        return "absent"
    if "const" in node:
        return _lit(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(_lit(v) for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(_words(branch, root) for branch in node[key])
    kind = node.get("type")
    if isinstance(kind, list):
        parts = [_words({**node, "type": k}, root) for k in kind]
        return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else parts[0]
    if kind in ("integer", "number"):
        return _number_words(node, kind)
    if kind == "boolean":
        return "true or false (a YAML boolean, without quotes)"
    if kind == "null":
        return "null"
    if kind == "string":
        if "pattern" in node:
            return node.get("description") or f"a string matching {node['pattern']!r}"
        return "a non-empty string" if node.get("minLength", 0) >= 1 else "a string"
    if kind == "array":
        return _array_words(node, root)
    if kind == "object":
        keys = list(node.get("properties", {}))
        closed = keys and node.get("additionalProperties") is False
        return f"a mapping with the keys {', '.join(keys)}" if closed else "a mapping"
    return "as data/schemas says"


def _number_words(node: dict, kind: str) -> str:
    noun = "an integer" if kind == "integer" else "a number"
    if "not" in node and "const" in node["not"]:
        return f"{noun} other than {_lit(node['not']['const'])}"
    lo_open, hi_open = "exclusiveMinimum" in node, "exclusiveMaximum" in node
    lo = node.get("exclusiveMinimum", node.get("minimum"))
    hi = node.get("exclusiveMaximum", node.get("maximum"))
    if hi is None and lo is None:
        return noun
    if hi is None:
        if (lo == 0 and lo_open) or (lo == 1 and kind == "integer" and not lo_open):
            return f"a positive {kind}"
        if lo == 0:
            return f"a non-negative {kind}"
        return f"{noun} {'>' if lo_open else '>='} {lo}"
    if lo is None:
        return f"{noun} {'<' if hi_open else '<='} {hi}"
    if kind == "integer" and not lo_open and not hi_open:
        return f"an integer from {lo} to {hi}"
    return f"a number in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"


def _array_words(node: dict, root: dict) -> str:
    if "prefixItems" in node:
        parts = [_resolve(p, root) for p in node["prefixItems"]]
        names = [p.get("title", f"item {i + 1}") for i, p in enumerate(parts)]
        each = ", ".join(f"{n} {_words(p, root)}" for n, p in zip(names, parts))
        return f"a list [{', '.join(names)}]: {each}"
    size = "non-empty list" if node.get("minItems", 0) >= 1 else "list"
    unique = " of distinct entries" if node.get("uniqueItems") else ""
    items = node.get("items")
    each = f", each {_words(items, root)}" if items not in (None, True, {}) else ""
    return f"a {size}{unique}{each}"
