"""Custom profiles: a chapter's profile changed by `--set KEY=VALUE` or read from a file.

`python -m implicit_bias run gln_norm --profile paper --set seeds=[0,1]` and
`--profile path/to/file.yaml` run a *custom profile*: the named profile (`smoke` or `paper`,
whose claims the run checks) with some parameters changed. The changed profile is validated by
the chapter's schemas (`implicit_bias.core.engine.profiles.validate_profile`) before anything runs,
and
everything the run writes goes under `results/custom/<name>/` (the cache, figures, claims, run
record and the executed notebook), so it never touches `results/smoke`, `results/paper` or the
book. `<name>` is the profile file's name, or `<profile>-<short hash of the overrides>`: the
same overrides reuse the same folder and its cache.

How the notebook's kernel gets the custom profile: the runner writes it, complete, to
`results/custom/<name>/profiles/<chapter>.yaml` (a profile file itself: pass it to `--profile`
to rerun) and sets `$IMPLICIT_BIAS_RESULTS` to `results/custom/<name>` and
`$IMPLICIT_BIAS_PROFILES` to its `profiles/` folder while the chapter executes; `load_profile`
reads a chapter's profile from there when that folder holds one, and `Chapter.show_profile`
shows what differs from the standard profile.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .paths import project_root, results_root
from .profiles import PROFILES, ProfileError, load_profiles_file, validate_profile

PROFILES_ENV = "IMPLICIT_BIAS_PROFILES"  # folder of the custom profile files of the current run
RESULTS_ENV = "IMPLICIT_BIAS_RESULTS"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_set(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` -> (KEY, VALUE read as YAML): `seeds=2` -> 2, `widths=[10,50]` -> [10, 50],
    `dtype=float64` -> "float64". KEY may be dotted (`theorem1.n=10`) to reach into a mapping."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ProfileError(f"--set {_said(text)!r}: write KEY=VALUE, e.g. --set seeds=[0,1]")
    try:
        return key, _yaml12_floats(yaml.load(value, Loader=_Loader))
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ProfileError(
            f"--set {_said(text)!r}: the value is not valid YAML ({problem})"
        ) from None


def _said(text: str, limit: int = 200) -> str:
    """What an error message echoes of a value given: at most `limit` characters of it."""
    return text if len(text) <= limit else f"{text[: limit - 40]} ... ({len(text)} characters)"


_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _yaml12_floats(value: Any) -> Any:
    """PyYAML follows YAML 1.1, where `1e-3` (no dot) is text; on a command line it is a number
    (YAML 1.2 reads it so)."""
    if isinstance(value, str) and _FLOAT.fullmatch(value):
        return float(value)
    if isinstance(value, list):
        return [_yaml12_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: _yaml12_floats(v) for k, v in value.items()}
    return value


def apply_set(config: dict, key: str, value: Any) -> None:
    """Set the (dotted) `key` of `config` to `value` in place; a missing key is added (the
    schema then says whether it is allowed)."""
    parts = key.split(".")
    node = config
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ProfileError(
                f"--set {key}=...: {'.'.join(parts[: depth + 1])} is not a mapping "
                f"(it is {json.dumps(child)}); set it whole"
            )
        node = child
    node[parts[-1]] = value


def deep_merge(base: dict, changes: dict) -> dict:
    """`base` with `changes` applied: mappings merge key by key, anything else is replaced."""
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def differences(base: dict, config: dict, prefix: str = "") -> dict[str, Any]:
    """The (dotted) keys whose value in `config` differs from `base`, with the new values."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        old = base.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out.update(differences(old, value, f"{prefix}{key}."))
        elif key not in base or old != value or type(old) is not type(value):
            out[f"{prefix}{key}"] = value
    return out


def standard_profile(chapter: str, profile: str) -> dict:
    """The profile as `data/profiles/<chapter>.yaml` defines it (validated)."""
    path = project_root() / "data" / "profiles" / f"{chapter}.yaml"
    if not path.exists():
        raise ProfileError(
            f"no profiles file {path.name} for chapter {chapter!r}: create "
            f"data/profiles/{chapter}.yaml with the profiles {PROFILES}"
        )
    return load_profiles_file(path, chapter)[profile]


def read_profile_file(path: Path) -> tuple[str, dict]:
    """A profile file's (profile, parameters): one profile, under the name of the profile it
    changes (its claims are checked), like one half of `data/profiles/<chapter>.yaml`; the keys
    it leaves out are that profile's."""
    try:
        data = yaml.load(path.read_bytes(), Loader=_Loader)
    except OSError as err:
        raise ProfileError(f"cannot read the profile file {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        from .profiles import yaml_problem

        raise ProfileError(yaml_problem(path, err)) from None
    names = list(data) if isinstance(data, dict) else []
    if len(names) != 1 or names[0] not in PROFILES:
        found = f"the keys {names}" if isinstance(data, dict) else "no mapping"
        raise ProfileError(
            f"{path.name}: a profile file holds one profile: its parameters under the name of the "
            f"profile they change, smoke or paper (whose claims the run checks); found {found}"
        )
    params = data[names[0]]
    if not isinstance(params, dict):
        raise ProfileError(f"{path.name}: {names[0]} must be a mapping of parameters")
    return names[0], params


def short_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:8]


@dataclass
class CustomProfile:
    """One chapter's custom profile, validated."""

    chapter: str
    base: str  # smoke or paper: the notebook's `profile`, the claims checked
    config: dict  # every parameter of the run
    name: str  # the run's folder: results/custom/<name>/
    source: str  # how it was asked for, e.g. "--set seeds=[0,1]"
    changes: dict  # dotted key -> value, what differs from the standard `base`
    root: Path  # where the run writes: results/custom/<name>/

    @property
    def profile_file(self) -> Path:
        return self.root / "profiles" / f"{self.chapter}.yaml"

    @property
    def notebook(self) -> Path:
        return self.root / "chapters" / f"{self.chapter}.ipynb"

    def record(self) -> dict:
        """What the run record (`run.json`) says about the custom profile (`name`: the folder
        under results/custom/, holding `profiles/<chapter>.yaml`, the complete profile)."""
        return {"name": self.name, "source": self.source, "changes": self.changes}

    def write(self) -> Path:
        """The complete profile, as a profile file the kernel reads (and `--profile` accepts)."""
        self.profile_file.parent.mkdir(parents=True, exist_ok=True)
        header = (
            f"# {self.chapter}: profile {self.base} changed by {self.source}.\n"
            f"# Written by `python -m implicit_bias run`; rerun it with\n"
            f"#   python -m implicit_bias run {self.chapter} --profile "
            f"{shown(self.profile_file)}\n"
        )
        body = yaml.safe_dump({self.base: self.config}, sort_keys=False, width=100)
        tmp = self.profile_file.with_name(f".{self.profile_file.name}.{os.getpid()}.tmp")
        tmp.write_text(header + body)
        tmp.replace(self.profile_file)
        return self.profile_file

    @contextlib.contextmanager
    def active(self):
        """While the chapter runs: results go under `root`, profiles are read from there (the
        kernel inherits both variables)."""
        saved = {k: os.environ.get(k) for k in (RESULTS_ENV, PROFILES_ENV)}
        self.write()
        os.environ[RESULTS_ENV] = str(self.root)
        os.environ[PROFILES_ENV] = str(self.profile_file.parent)
        try:
            yield self
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def custom_profile(
    chapter: str, profile: str, sets: list[str] | tuple[str, ...] = ()
) -> CustomProfile | None:
    """The custom profile that `--profile PROFILE --set ...` asks for, validated; None for a
    standard profile without overrides. `profile` is smoke, paper or a profile file's path.
    Raises `ProfileError` with the schema's message naming the key."""
    pairs = [parse_set(text) for text in sets]
    if profile in PROFILES:
        if not pairs:
            return None
        params: dict = {}
        base, source = profile, "--set " + " ".join(sets)
        name = f"{profile}-{short_hash([profile, pairs])}"
    else:
        path = Path(profile)
        if not path.is_file():
            raise ProfileError(
                f"unknown profile {profile!r}; valid: {', '.join(PROFILES)}, or a "
                "profile file (path/to/file.yaml)"
            )
        base, params = read_profile_file(path)
        source = path.name + (" and --set " + " ".join(sets) if sets else "")
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", path.stem)
        name = f"{stem}-{short_hash(pairs)}" if pairs else stem
    standard = standard_profile(chapter, base)
    config = deep_merge(standard, params)
    for key, value in pairs:
        apply_set(config, key, value)
    validate_profile(config, chapter, base, f"{chapter}, profile {base} with {_said(source)}")
    return CustomProfile(
        chapter,
        base,
        config,
        name,
        source,
        differences(standard, config),
        results_root() / "custom" / name,
    )


def active_profile_file(chapter: str) -> Path | None:
    """The custom profile file of `chapter` in the current run, if there is one."""
    folder = os.environ.get(PROFILES_ENV)
    path = Path(folder) / f"{chapter}.yaml" if folder else None
    return path if path is not None and path.is_file() else None


def load_active_profile(path: Path, chapter: str, profile: str) -> tuple[dict, dict]:
    """(parameters, changes from the standard profile) of a custom run's profile file,
    validated; its profile must be the one the notebook asks for."""
    base, params = read_profile_file(path)
    if base != profile:
        raise ProfileError(
            f"{path.name}: holds the {base} profile, but the chapter runs the {profile} profile"
        )
    standard = standard_profile(chapter, base)
    config = deep_merge(standard, params)
    validate_profile(config, chapter, base, path.name)
    return config, differences(standard, config)


def shown(path: Path) -> str:
    """`path` relative to the project root where it is inside it (what messages print)."""
    try:
        return str(path.resolve().relative_to(project_root()))
    except ValueError:
        return str(path)
