"""The offline GPU run kit: its packing, budget and summary logic (always), and the built kit
itself (its size, and that every module the book imports resolves from the kit plus the GPU
image's packages), skipped where `make gpu-kit` has not been run. Nothing here downloads."""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
from pathlib import Path

import pytest

from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.tools import gpu_kit, gpu_run, kit_contents

ROOT = project_root()
MANIFEST = ROOT / gpu_kit.KIT / "kit.json"


# -- pure logic ------------------------------------------------------------------------------
def test_budget_shares_follow_the_chapters_and_what_is_left():
    assert gpu_run.part_budget(540, [100, 200], [100, 200, 300]) == pytest.approx(270)
    assert gpu_run.part_budget(540, [], []) == 0
    assert gpu_run.chapter_weight(0) == gpu_run.CACHED_RUN_S
    assert gpu_run.chapter_weight(float("inf")) == gpu_run.CACHED_RUN_S + gpu_run.WEIGHT_CAP_S
    assert gpu_run.chapter_weight(100.0, cached_run_s=130.0) == 230.0
    assert gpu_run.chapter_weight(0.0, cached_run_s=6.0) == gpu_run.CACHED_RUN_S  # a floor
    assert gpu_run.reserve_for(3) == gpu_run.RESERVE_FIXED + 3 * gpu_run.RESERVE_PER_CHAPTER
    # 300 s left, 45 reserved, 3 chapters: 85 s each; a quick first chapter leaves more
    assert gpu_run.chapter_share(300, 3, reserve=45) == pytest.approx(85)
    assert gpu_run.chapter_share(280, 2, reserve=45) == pytest.approx(117.5)
    assert gpu_run.chapter_share(30, 2, reserve=45) == 0
    assert gpu_run.chapter_share(100, 0, reserve=5) == 0


def test_run_order_is_cheapest_first_and_stable():
    order = gpu_run.run_order({"b": 10.0, "a": 0.0, "c": 0.0, "d": 5.0})
    assert order == ["a", "c", "d", "b"]


def test_claim_changes_lists_status_changes_and_missing_claims():
    before = {"claims": [{"id": "x", "status": "pass"}, {"id": "y", "status": "pass"}]}
    after = {"claims": [{"id": "x", "status": "fail"}, {"id": "z", "status": "pass"}]}
    assert gpu_run.claim_changes(before, after) == [
        "x: pass -> fail",
        "y: pass -> missing",
        "z: missing -> pass",
    ]
    assert gpu_run.claim_changes(before, before) == []
    assert gpu_run.claim_changes(before, None) == []
    assert gpu_run.outcome({"ok": True}, False, []) == "ok"
    assert gpu_run.outcome({"ok": True}, False, ["x: pass -> fail"]) == "claims changed"
    assert gpu_run.outcome(None, True, []) == "timed out"
    assert gpu_run.outcome({"ok": False}, False, []) == "failed"


def _row(chapter, outcome, **kw):
    row = {
        "chapter": chapter,
        "outcome": outcome,
        "share_s": 100.0,
        "wall_s": 12.3,
        "tasks_computed": 4,
        "tasks_cached": 6,
        "tasks_failed": 0,
        "device_tasks_committed": 4,
        "claims": "3 pass",
        "changes": [],
        "largest_rel_dev": 1.5e-6,
    }
    return {**row, **kw}


def test_summary_and_csv_say_what_ran_and_what_was_skipped():
    meta = {
        "date": "2026-11-27",
        "commit": "abc1234",
        "part": 1,
        "device": "cuda",
        "gpu": "NVIDIA H100",
        "python": "3.12.1",
        "torch": "2.11.0",
        "budget_s": 405.0,
        "setup_s": 20.0,
        "wall_s": 390.0,
        "not_in_part": ["galu_expressivity"],
    }
    rows = [
        _row("a", "ok"),
        _row("b", "timed out", note="interrupted after 200 s", largest_rel_dev=None),
        _row("c", "skipped", note="3 s left for it", wall_s=0.0, share_s=3.0),
        _row("d", "figures differ", figure_problems=["d/f1: f1.csv: x differs"]),
    ]
    text = gpu_run.summary_markdown(meta, rows)
    assert "| a | ok | 12 | 100 | 4 / 6 / 0 | 4 | 3 pass | none | 1.50e-06 |" in text
    assert "- b: timed out (interrupted after 200 s)" in text
    assert "- c: skipped (3 s left for it)" in text
    assert "Chapters of other parts: galu_expressivity." in text
    assert "- d/f1: f1.csv: x differs" in text
    lines = gpu_run.csv_text(meta, rows).splitlines()
    assert lines[0].split(",") == list(gpu_run.CSV_COLUMNS)
    assert len(lines) == 5 and lines[1].startswith("2026-11-27,abc1234,1,a,cuda,NVIDIA H100")


KIB = 1024  # sizes below in KiB as a device command counts them (`gpu_kit.carried_size`)


def _item(tmp_path, key, size, kind="wheel"):
    path = tmp_path / f"{key or 'base'}-{size}.bin"
    path.write_bytes(b"x" * (size * KIB - 512))  # a tar header and two blocks a KiB
    return gpu_kit.Item(key, [path], kind)


def test_pack_puts_what_all_need_first_and_the_most_demanded_extras_next(tmp_path):
    base = [_item(tmp_path, None, 30)]
    extras = [
        _item(tmp_path, "scs", 40),
        _item(tmp_path, "mnist", 9, "dataset"),
        _item(tmp_path, "fashion_mnist", 26, "dataset"),
        _item(tmp_path, "sparsediffpy", 12),
    ]
    demand = {"mnist": 3, "scs": 1, "fashion_mnist": 1, "sparsediffpy": 0}
    parts = gpu_kit.pack(base, extras, 44 * KIB, demand)
    held = [[i.key for i in p.items] for p in parts]
    assert held == [[None, "mnist"], ["scs"], ["fashion_mnist", "sparsediffpy"]]
    assert [p.folder for p in parts] == ["gpu-kit", "gpu-kit-2", "gpu-kit-3"]
    needs = {"gln": {"mnist"}, "galu": {"mnist", "fashion_mnist"}, "dmf": {"scs"}, "tn": set()}
    assert gpu_kit.chapter_parts(needs, parts) == {"gln": 1, "galu": 3, "dmf": 2, "tn": 1}
    with pytest.raises(ValueError, match="no part holds"):
        gpu_kit.chapter_parts({"x": {"cifar"}}, parts)
    assert gpu_kit.base_parts(parts) == 1
    with pytest.raises(ValueError, match="every chapter needs"):
        gpu_kit.pack([_item(tmp_path, None, 50)], [], 44 * KIB, {})
    with pytest.raises(ValueError, match="exceeds a part"):
        gpu_kit.pack(base, [_item(tmp_path, "huge", 45)], 44 * KIB, {})


def test_wheels_every_chapter_needs_may_fill_several_parts(tmp_path):
    # a working tree that leaves less room than the base wheels take: they spread over the
    # first parts, and no chapter runs before the last of those
    base = [_item(tmp_path, None, n) for n in (20, 18, 9)]
    extras = [_item(tmp_path, "mnist", 10, "dataset"), _item(tmp_path, "scs", 21)]
    parts = gpu_kit.pack(base, extras, 30 * KIB, {"mnist": 2, "scs": 1})
    held = [sorted(str(i.key) for i in p.items) for p in parts]
    assert held == [["None", "None"], ["None", "mnist"], ["scs"]]
    assert gpu_kit.base_parts(parts) == 2
    needs = {"tn": set(), "gln": {"mnist"}, "dmf": {"scs"}}
    assert gpu_kit.chapter_parts(needs, parts) == {"tn": 2, "gln": 2, "dmf": 3}


def test_chapter_needs_tells_mnist_from_fashion_mnist():
    assert gpu_kit.chapter_needs("X = load_mnist('train')") == {"mnist"}
    assert gpu_kit.chapter_needs('dataset: [fashion_mnist]\nload_fashion_mnist("test")') == {
        "fashion_mnist"
    }
    assert gpu_kit.chapter_needs('solver = "SCS"') == {"scs"}
    assert gpu_kit.chapter_needs("scs_tolerance = 1") == set()


def test_image_package_list_is_read_as_normalized_names():
    names = gpu_kit.image_packages(ROOT)
    assert {"torch", "numpy", "scipy", "pandas", "matplotlib", "seaborn", "pyyaml"} <= names
    assert "python-dateutil" in names and all(n == gpu_kit.normalize(n) for n in names)


def test_run_requirements_leave_out_torch_and_the_website_toolchain():
    names = {gpu_kit._spec_name(r) for r in gpu_kit.run_requirements(ROOT)}
    assert {"cvxpy", "papermill", "jupytext", "ipykernel"} <= names
    assert not names & {"torch", "jupyter-book", "sphinx", "myst-nb"}


# -- the built kit ---------------------------------------------------------------------------
needs_kit = pytest.mark.skipif(
    not MANIFEST.is_file(), reason="the GPU kit is not built here (make gpu-kit)"
)


@needs_kit
def test_every_part_fits_one_device_command_beside_the_working_tree():
    manifest = json.loads(MANIFEST.read_text())
    tree = gpu_kit.tree_size(ROOT)
    for part in manifest["parts"]:
        size = gpu_kit.kit_bytes(ROOT, part["number"])
        assert size + tree <= gpu_kit.CARRY_LIMIT, (
            f"part {part['number']}: {size / 2**20:.1f} MiB + tree {tree / 2**20:.1f} MiB "
            f"exceeds {gpu_kit.CARRY_LIMIT / 2**20:.0f} MiB: rebuild the kit (make gpu-kit)"
        )
        for wheel in part["wheels"]:
            assert re.search(r"-(cp312-cp312|cp3\d+-abi3|py3-none|py2\.py3-none)-", wheel["file"])
            assert (ROOT / part["folder"] / wheel["file"]).is_file()


@needs_kit
def test_every_module_the_book_imports_resolves_from_the_kit_or_the_image():
    manifest = json.loads(MANIFEST.read_text())
    from_kit = {m for p in manifest["parts"] for w in p["wheels"] for m in w["modules"]}
    image = gpu_kit.image_packages(ROOT)
    distributions = importlib.metadata.packages_distributions()
    unresolved = []
    for module in sorted(kit_contents.third_party_imports(ROOT)):
        owners = {gpu_kit.normalize(d) for d in distributions.get(module, [])}
        if module not in from_kit and not owners & image:
            unresolved.append(f"{module} (installed here by {sorted(owners) or 'nothing'})")
    assert not unresolved, f"neither in the kit nor in {gpu_kit.IMAGE_PACKAGES}: {unresolved}"
    for chapter, entry in manifest["chapters"].items():
        assert set(entry["needs"]) <= {
            k for p in manifest["parts"] if p["number"] <= entry["part"] for k in p["data"]
        } | {
            gpu_kit.wheel_name(Path(w["file"]).name)
            for p in manifest["parts"]
            if p["number"] <= entry["part"]
            for w in p["wheels"]
        }, chapter


def test_a_chapter_starts_from_the_committed_results_without_their_run_record(tmp_path):
    root, results = tmp_path / "repo", tmp_path / "scratch"
    committed = root / "results" / "paper"
    (committed / "ch" / "sweep").mkdir(parents=True)
    (committed / "ch" / "sweep" / "abc.json").write_text("{}")
    (committed / "ch" / "run.json").write_text('{"tasks": {"computed": 5}}')
    (committed / "figures" / "ch").mkdir(parents=True)
    (committed / "figures" / "ch" / "f.csv").write_text("x\n1\n")
    (committed / "claims").mkdir()
    (committed / "claims" / "ch.json").write_text('{"claims": []}')
    (results / "paper" / "ch" / ".run").mkdir(parents=True)
    (results / "paper" / "ch" / ".run" / "last-run.json").write_text("{}")  # an earlier run's
    gpu_run._copy_committed(root, results, "ch")
    copy = results / "paper"
    assert (copy / "ch" / "sweep" / "abc.json").is_file()
    assert (copy / "figures" / "ch" / "f.csv").is_file()
    assert (copy / "claims" / "ch.json").is_file()
    assert not (copy / "ch" / "run.json").exists() and not (copy / "ch" / ".run").exists()
    assert gpu_run._run_record(copy / "ch") is None  # nothing ran: no record to mistake
    (copy / "ch" / ".run").mkdir()
    (copy / "ch" / ".run" / "last-run.json").write_text('{"ok": true}')
    assert gpu_run._run_record(copy / "ch") == {"ok": True}


def test_a_dataset_spread_over_parts_is_unpacked_once_its_last_part_is_there(tmp_path, monkeypatch):
    import lzma

    from implicit_bias.core.engine import data

    monkeypatch.setattr(data, "CHECKSUMS", {"toy": {"a.idx": "x", "b.idx": "y"}})
    verified = []
    monkeypatch.setattr(data, "verify", lambda name, root: verified.append(name))
    parts = [tmp_path / "gpu-kit", tmp_path / "gpu-kit-2"]
    for part, name in zip(parts, ("a.idx", "b.idx")):
        (part / "data" / "toy").mkdir(parents=True)
        (part / "data" / "toy" / f"{name}.xz").write_bytes(lzma.compress(name.encode()))
    root = tmp_path / "work"
    # the first part alone: its file is unpacked, the dataset is not there yet
    assert gpu_run._unpack_datasets(parts[:1], root) == [] and verified == []
    assert (root / "toy" / "a.idx").read_bytes() == b"a.idx"
    # the second part, carried by a later command: the first one's file is kept
    assert gpu_run._unpack_datasets(parts[1:], root) == ["toy"] and verified == ["toy"]
    assert (root / "toy" / "b.idx").read_bytes() == b"b.idx"


def test_a_file_counts_as_in_a_tar_archive():
    # a 512-byte header and the content in 512-byte blocks: 2,798 small files weigh 2 MiB more
    # than their content, which turned a 62.0 MiB carry into a refused 64.1 MiB one
    assert [gpu_kit.carried_size(n) for n in (0, 1, 512, 513)] == [512, 1024, 1024, 1536]


def test_a_file_too_large_for_a_part_travels_in_pieces_joined_once_the_last_is_there(tmp_path):
    from implicit_bias.core.tools import kit_pieces

    whole = tmp_path / "big.whl"
    whole.write_bytes(bytes(range(256)) * 10)  # 2,560 bytes: pieces of 1,000, 1,000 and 560
    pieces = kit_pieces.split(whole, tmp_path / "cut", size=1000)
    assert [p.name for p in pieces] == [f"big.whl.piece-00{i}-of-003" for i in (1, 2, 3)]
    assert [p.stat().st_size for p in pieces] == [1000, 1000, 560]
    assert kit_pieces.split(whole, tmp_path / "cut", size=4000) == [whole]  # small: whole
    parts = [tmp_path / "gpu-kit", tmp_path / "gpu-kit-2"]
    for part, held in zip(parts, (pieces[:2], pieces[2:])):
        (part / "wheels").mkdir(parents=True)
        for piece in held:
            (part / "wheels" / piece.name).write_bytes(piece.read_bytes())
        record = {"whole": "wheels/big.whl", "whole_sha256": kit_pieces.sha256(whole)}
        (part / "part.json").write_text(json.dumps({"wheels": [record], "data": {}}))
    work = tmp_path / "work"
    # the first part alone: its pieces are kept, nothing is joined yet
    assert kit_pieces.assemble(parts[:1], work) == []
    assert not (parts[0] / "wheels" / "big.whl").exists()
    # the second part, carried by a later command, completes the file in its own folder
    assert kit_pieces.assemble(parts[1:], work) == [parts[1] / "wheels" / "big.whl"]
    assert (parts[1] / "wheels" / "big.whl").read_bytes() == whole.read_bytes()
    # a piece that differs from what was recorded: no joined file, an error that says so
    (parts[1] / "wheels" / "big.whl").unlink()
    (parts[1] / "wheels" / pieces[2].name).write_bytes(b"\0" * 560)
    shutil.rmtree(work / "pieces" / "wheels")
    (work / "pieces" / "wheels").mkdir()
    for piece in pieces[:2]:
        (work / "pieces" / "wheels" / piece.name).write_bytes(piece.read_bytes())
    with pytest.raises(ValueError, match="SHA-256 differs"):
        kit_pieces.assemble(parts[1:], work)
    assert not list((parts[1] / "wheels").glob("big.whl*[!0-9]"))
