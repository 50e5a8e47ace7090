"""Report paths: every path a report shows is made relative to its root in one place."""

from __future__ import annotations

from pathlib import Path

from repairbot.loop import collect_health
from repairbot.output.paths import ReportPaths
from repairbot.types import Decline, Failure, Frame, HealthFinding


def test_files_and_locations_are_relative_to_the_root_posix_and_kept_outside_it(tmp_path: Path) -> None:
    paths = ReportPaths(tmp_path)
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    inside = tmp_path / "src" / "pkg" / "model.py"
    assert paths.file(inside) == paths.file(str(inside)) == "src/pkg/model.py"
    assert paths.file(tmp_path / "src" / ".." / "train.py") == "train.py"
    assert paths.file("/elsewhere/lib.py") == "/elsewhere/lib.py"  # outside the project: as given
    assert paths.location(f"{inside}:12") == "src/pkg/model.py:12"
    assert paths.location("/elsewhere/lib.py:3") == "/elsewhere/lib.py:3"
    assert paths.location("no line") is None and paths.location(None) is None and paths.location(7) is None
    assert paths.inside(inside) and not paths.inside(Path("/elsewhere/lib.py"))


def test_failures_declines_and_evidence_are_rebased(tmp_path: Path) -> None:
    paths = ReportPaths(tmp_path)
    user = Frame(str(tmp_path / "train.py"), 4, "<module>", "y = f(x)", user=True)
    library = Frame(str(tmp_path / ".venv" / "torch" / "nn.py"), 9, "forward", user=False)
    worker = Frame(str(tmp_path / "data.py"), 2, "__getitem__", user=True)
    failure = paths.failure(Failure("E", "m", frames=(library, user), worker_frames=(worker,)))
    # the project's frames as the report names them; a library frame as the traceback printed it
    assert [f.file for f in failure.frames] == [library.file, "train.py"]
    assert [f.file for f in failure.worker_frames] == ["data.py"]
    declines = paths.declines((Decline("p", "r", file=str(tmp_path / "a.py"), line=1), Decline("q", "r")))
    assert [d.file for d in declines] == ["a.py", None]
    evidence = paths.evidence({
        "site": f"{tmp_path}/model.py:4", "sites": [f"{tmp_path}/a.py:1", "model.py:2"], "nested": {"at": f"{tmp_path}/b.py:3"},
        "name": "/not/a/location", "count": 3, "ratio": "1:2",
    })
    assert evidence == {
        "site": "model.py:4", "sites": ["a.py:1", "model.py:2"], "nested": {"at": "b.py:3"},
        "name": "/not/a/location", "count": 3, "ratio": "1:2",
    }


def test_health_findings_go_through_the_same_paths(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    finding = HealthFinding("nan-loss", "the loss is NaN", file=str(script), line=1,
                            evidence={"first_nan_at": f"{script}:1"})
    (collected,) = collect_health((finding,), tmp_path, lambda path: path.read_bytes())
    assert (collected.file, collected.evidence) == ("train.py", {"first_nan_at": "train.py:1"})
