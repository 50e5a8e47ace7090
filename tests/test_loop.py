"""The repair loop's decisions, replayed with a scripted runner and a toy pattern (no torch)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import libcst as cst
import pytest

from repairbot import api
from repairbot.classify import candidates
from repairbot.edits import Edit, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence, ForcedLimit, TracedLimits
from repairbot.loop import Located, LoopOptions, RepairLoop, failure_key, run_ended, stop_reason
from repairbot.pattern import Pattern, signature
from repairbot.run_config import RunConfig
from repairbot.sources import Sources
from repairbot.trace.runner import Limits, RunRequest, RunResult
from repairbot.types import (
    Applicability,
    BadInput,
    Decline,
    Failure,
    Frame,
    Outcome,
    RunStatus,
    Span,
    Status,
    StopReason,
)

SCRIPT = 'a = "boom1"\nb = "boom2"\nprint(a, b)\n'


@dataclass(frozen=True)
class Defuse(Rewrite):
    value: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        string = nodes.node(cst.SimpleString)
        return [Edit(string, string.with_changes(value=f'"{self.value}"'))]


class Boom(Pattern):
    """Toy pattern: replaces the string literal named by a BoomError."""

    ID = "boom"
    TITLE = "toy"
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (signature("BoomError", r"(?P<name>boom\d)"),)
    REWRITES = (Defuse,)
    replacement = "ok"

    def locate(self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("no user frame")
        wrapper = sources.metadata(Path(frame.file))
        for node, span in wrapper.resolve(__import__("libcst.metadata", fromlist=["PositionProvider"]).PositionProvider).items():
            if isinstance(node, cst.SimpleString) and match["name"] in node.value:
                return Site(
                    pattern=self.ID, file=frame.file, span=Span(span.start.line, span.start.column, span.end.line, span.end.column),
                    rewrite=Defuse(self.replacement), summary=f"defused {match['name']}", applicability=self.APPLICABILITY,
                )
        return self.decline("no such string")


class ScriptedRunner:
    """Answers each run from the overlay's content, like a real script would behave."""

    def __init__(self, script: Path, behave: Callable[[str, RunRequest], RunResult]) -> None:
        self.script = script
        self.behave = behave
        self.requests: list[RunRequest] = []

    def run(self, request: RunRequest) -> RunResult:
        self.requests.append(request)
        source = request.overlay.get(self.script, self.script.read_bytes()).decode()
        return self.behave(source, request)


def failed(script: Path, exc_type: str, message: str, line: int = 1, progress: tuple[int, ...] = (0, 0, 1),
           forced: bool = False, user: bool = True) -> RunResult:
    failure = Failure(exc_type, message, frames=(Frame(str(script), line, "<module>", f"code of line {line}", user=user),))
    evidence = Evidence(outcome="failed", exit_code=1, failure=failure, progress=progress,
                        limits=TracedLimits(forced=(ForcedLimit("DataLoader batch_size 64 -> 2", None),) if forced else ()))
    return RunResult(RunStatus.FAILED, 1, 0.1, failure, evidence, progress=progress)


def passed() -> RunResult:
    return RunResult(RunStatus.PASSED, 0, 0.1, None, Evidence(outcome="passed", exit_code=0))


def booms(script: Path) -> Callable[[str, RunRequest], RunResult]:
    """Fails on the first remaining boom string; the second boom fails further on."""
    def behave(source: str, request: RunRequest) -> RunResult:
        if "boom1" in source:
            return failed(script, "BoomError", "boom1", 1, (0, 0, 1))
        if "boom2" in source:
            return failed(script, "BoomError", "boom2", 2, (0, 0, 2))
        return passed()
    return behave


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def loop(script: Path, runner: ScriptedRunner, patterns: tuple[Pattern, ...] = (Boom(),), **options: object) -> RepairLoop:
    values: dict[str, object] = dict(
        script=script, args=(), cwd=script.parent, root=script.parent, python="python",
        limits=Limits(), timeout=10.0, max_attempts=3, patterns=patterns,
    )
    values.update(options)
    return RepairLoop(LoopOptions(**values), runner, Sources())  # type: ignore[arg-type]


def test_already_passing(script: Path) -> None:
    result = loop(script, ScriptedRunner(script, lambda s, r: passed())).run()
    assert (result.status, result.stop_reason, result.attempts) == (Status.ALREADY_PASSING, StopReason.PASSING, ())


def test_two_failures_two_attempts_then_fixed(script: Path) -> None:
    runner = ScriptedRunner(script, booms(script))
    result = loop(script, runner).run()
    assert (result.status, result.stop_reason) == (Status.FIXED, StopReason.PASSING)
    assert [a.outcome for a in result.attempts] == [Outcome.FAILED_OTHER, Outcome.PASSED]
    assert all(a.applied for a in result.attempts)
    assert result.verified[script].decode() == 'a = "ok"\nb = "ok"\nprint(a, b)\n'
    assert script.read_text() == SCRIPT  # nothing on disk changed
    assert len(runner.requests) == 3


def test_attempt_limit_reports_partial_fix(script: Path) -> None:
    result = loop(script, ScriptedRunner(script, booms(script)), max_attempts=1).run()
    assert (result.status, result.stop_reason) == (Status.GAVE_UP, StopReason.MAX_ATTEMPTS)
    assert result.verified[script].decode().startswith('a = "ok"')
    assert result.remaining is not None and "boom2" in result.remaining.message


def test_same_error_discards_the_fix(script: Path) -> None:
    runner = ScriptedRunner(script, lambda s, r: failed(script, "BoomError", "boom1"))
    result = loop(script, runner).run()
    assert (result.status, result.stop_reason) == (Status.GAVE_UP, StopReason.SAME_ERROR)
    assert result.attempts[0].outcome is Outcome.FAILED_SAME and not result.attempts[0].applied
    assert result.verified == {}


TWICE = 'a = "boom1"\nb = "boom1"\nprint(a, b)\n'


def test_the_same_mistake_on_another_line_is_progress(script: Path) -> None:
    # Each remaining boom1 fails the run the same way at line 3; the culprit the pattern
    # locates moves from line 1 to line 2 once the first is fixed: that fix is kept.
    script.write_text(TWICE)
    runner = ScriptedRunner(script, lambda s, r: failed(script, "BoomError", "boom1", 3) if "boom1" in s else passed())
    result = loop(script, runner).run()
    assert (result.status, result.stop_reason) == (Status.FIXED, StopReason.PASSING)
    assert [(a.outcome, a.applied) for a in result.attempts] == [(Outcome.FAILED_OTHER, True), (Outcome.PASSED, True)]
    assert [a.fix.site.span.line for a in result.attempts if a.fix] == [1, 2]
    assert any("was kept" in note and "train.py:2" in note for note in result.notes)
    assert result.verified[script].decode() == 'a = "ok"\nb = "ok"\nprint(a, b)\n'


def test_the_same_culprit_again_discards_the_fix(script: Path) -> None:
    class Keeps(Boom):  # a "fix" that leaves the culprit where it was
        replacement = "boom1 still"

    script.write_text(TWICE)
    runner = ScriptedRunner(script, lambda s, r: failed(script, "BoomError", "boom1", 3))
    result = loop(script, runner, patterns=(Keeps(),)).run()
    assert (result.status, result.stop_reason) == (Status.GAVE_UP, StopReason.SAME_ERROR)
    assert [(a.outcome, a.applied) for a in result.attempts] == [(Outcome.FAILED_SAME, False)]
    assert result.verified == {}


def test_a_culprit_moved_to_the_fixs_own_alternative_is_no_progress(script: Path) -> None:
    class Alternatives(Boom):  # first the string at line 1, the one at line 2 its alternative
        ID = "alternatives"

        def locate(self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources) -> Site | Decline:
            found = super().locate(failure, match, evidence, sources)
            if isinstance(found, Decline) or found.span.line != 1:
                return found
            other = Site(**{**found.__dict__, "span": Span(2, 4, 2, 11), "evidence": {"candidate": "second"}})
            return Site(**{**found.__dict__, "evidence": {"candidate": "first"}, "alternatives": (other,)})

    # only the string at line 2 matters: the first candidate is wrong, and the culprit the rerun
    # locates (line 2) is the alternative of that same fix, so the fix is discarded, not kept
    script.write_text(TWICE)
    runner = ScriptedRunner(script, lambda s, r: failed(script, "BoomError", "boom1", 3) if 'b = "boom1"' in s else passed())
    result = loop(script, runner, patterns=(Alternatives(),)).run()
    assert (result.status, result.stop_reason) == (Status.FIXED, StopReason.PASSING)
    assert [(a.outcome, a.applied) for a in result.attempts] == [(Outcome.FAILED_SAME, False), (Outcome.PASSED, True)]
    assert result.verified[script].decode() == 'a = "boom1"\nb = "ok"\nprint(a, b)\n'


def test_a_moved_culprit_is_found_with_the_patterns_rerun_probes(script: Path) -> None:
    class Traced(Boom):  # locates only with its costly probe's records, like inplace-autograd
        ID = "traced"
        RERUN_PROBES = frozenset({"culprit"})

        def locate(self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources) -> Site | Decline:
            if evidence is None or "culprit" not in evidence.probes:
                return self.decline("not traced")
            return super().locate(failure, match, evidence, sources)

    def behave(source: str, request: RunRequest) -> RunResult:
        if "boom1" not in source:
            return passed()
        result = failed(script, "BoomError", "boom1", 3)
        assert result.evidence is not None
        return replace(result, evidence=replace(result.evidence, probes=request.probes))

    script.write_text(TWICE)
    runner = ScriptedRunner(script, behave)
    result = loop(script, runner, patterns=(Traced(),), max_attempts=2).run()
    assert (result.status, result.stop_reason) == (Status.FIXED, StopReason.PASSING)
    # the script, traced; fix 1 verified, then traced again (culprit at line 2); fix 2 verified
    assert [bool(r.probes) for r in runner.requests] == [False, True, False, True, False]
    assert [(a.outcome, a.applied) for a in result.attempts] == [(Outcome.FAILED_OTHER, True), (Outcome.PASSED, True)]


def test_fix_that_fails_earlier_is_discarded(script: Path) -> None:
    def behave(source: str, request: RunRequest) -> RunResult:
        if "boom1" in source:
            return failed(script, "BoomError", "boom1", 1, (3, 4, 10))
        return failed(script, "NameError", "name 'ok' is not defined", 1, (0, 0, 0))

    result = loop(script, ScriptedRunner(script, behave)).run()
    assert result.verified == {}
    assert result.attempts[0].outcome is Outcome.FAILED_OTHER and not result.attempts[0].applied
    assert result.stop_reason is StopReason.NO_PATTERN  # the only candidate is excluded now
    assert any("failed earlier" in note for note in result.notes)


@pytest.mark.parametrize(
    ("exc_type", "message", "user", "reason"),
    [
        ("ValueError", "something else", True, StopReason.NO_PATTERN),
        ("FileNotFoundError", "[Errno 2] No such file or directory: 'data/train.csv'", True, StopReason.ENVIRONMENT),
        ("ModuleNotFoundError", "No module named 'torchvision'", True, StopReason.ENVIRONMENT),
        ("ValueError", "inside a library", False, StopReason.NO_USER_FRAME),
    ],
)
def test_unfixable_failures(script: Path, exc_type: str, message: str, user: bool, reason: StopReason) -> None:
    runner = ScriptedRunner(script, lambda s, r: failed(script, exc_type, message, user=user))
    result = loop(script, runner).run()
    assert (result.status, result.stop_reason) == (Status.GAVE_UP, reason)
    assert result.attempts[0].fix is None and result.attempts[0].outcome is Outcome.NOT_RUN


def test_timeout(script: Path) -> None:
    runner = ScriptedRunner(script, lambda s, r: RunResult(RunStatus.TIMEOUT, None, 10.0, None, None))
    result = loop(script, runner).run()
    assert (result.status, result.stop_reason) == (Status.GAVE_UP, StopReason.TIMEOUT)


def test_rerun_timeout_discards_the_fix_and_says_how_far_it_got(script: Path) -> None:
    def behave(source: str, request: RunRequest) -> RunResult:
        if "boom1" in source:
            return failed(script, "BoomError", "boom1", 1, (0, 1, 3))
        return RunResult(RunStatus.TIMEOUT, None, 10.0, None, None, progress=(4, 1, 900))

    result = loop(script, ScriptedRunner(script, behave)).run()
    assert (result.status, result.stop_reason) == (Status.GAVE_UP, StopReason.TIMEOUT)
    assert result.verified == {} and not result.attempts[0].applied
    assert "past the point of the old failure (4 optimizer steps, 1 batches, 900 module calls)" in result.notes[-1]


def test_failure_only_under_forced_batch_size_is_confirmed_and_never_fixed(script: Path) -> None:
    def behave(source: str, request: RunRequest) -> RunResult:
        if request.limits.force_batch_size:
            return failed(script, "BoomError", "boom1", forced=True)
        return passed()

    runner = ScriptedRunner(script, behave)
    result = loop(script, runner).run()
    assert (result.status, result.stop_reason) == (Status.ALREADY_PASSING, StopReason.PASSING)
    assert result.attempts == () and result.verified == {}
    assert [r.limits.force_batch_size for r in runner.requests] == [True, False]
    assert any("only with the batch size forced" in note for note in result.notes)


def test_confirmed_failure_is_fixed(script: Path) -> None:
    runner = ScriptedRunner(script, lambda s, r: booms(script)(s, r) if "boom1" not in s
                            else failed(script, "BoomError", "boom1", forced=True))
    result = loop(script, runner).run()
    assert result.status is Status.FIXED
    assert runner.requests[1].limits.force_batch_size is False  # the confirmation run


def test_safe_only_declines_unsafe_sites(script: Path) -> None:
    class RiskyBoom(Boom):
        APPLICABILITY = Applicability.UNSAFE

    result = loop(script, ScriptedRunner(script, booms(script)), patterns=(RiskyBoom(),), safe_only=True).run()
    assert result.stop_reason is StopReason.DIAGNOSED
    assert "--safe-only" in result.attempts[0].declines[0].reason


def test_run_check_refusal_propagates(script: Path) -> None:
    def refuse(result: RunResult) -> None:
        raise BadInput("model.py is modified")

    repair = loop(script, ScriptedRunner(script, booms(script)))
    repair.check_run = refuse
    with pytest.raises(BadInput, match="modified"):
        repair.run()


def test_failure_key_ignores_numbers_and_line_shifts(script: Path) -> None:
    a = Failure("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (2x512 and 256x10)",
                frames=(Frame("m.py", 10, "forward", "x = self.fc(x)", user=True),))
    b = Failure("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (2x512 and 300x10)",
                frames=(Frame("m.py", 12, "forward", "x = self.fc(x)", user=True),))
    assert failure_key(a) == failure_key(b)


def test_failure_key_ignores_torchs_hint() -> None:
    # a tracing rerun in anomaly mode gets torch's other hint: still the same failure
    modified = "one of the variables needed for gradient computation has been modified by an inplace operation: " \
        "[torch.FloatTensor [6, 8]], which is output 0 of AsStrided, is at version 1; expected version 0 instead."
    frames = (Frame("m.py", 30, "<module>", "loss.backward()", user=True),)
    plain = Failure("RuntimeError", modified + " Hint: enable anomaly detection to find the operation ...", frames=frames)
    anomaly = Failure("RuntimeError", modified + " Hint: the backtrace further above shows the operation ...", frames=frames)
    other = Failure("RuntimeError", modified.replace("AsStrided", "Sigmoid") + " Hint: enable ...", frames=frames)
    assert failure_key(plain) == failure_key(anomaly) != failure_key(other)


class Raises(Boom):
    """A pattern with a bug: its locate raises."""

    ID = "raises"

    def locate(self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources) -> Site | Decline:
        return {}[match["name"]]  # type: ignore[no-any-return]


def test_a_pattern_whose_locate_raises_is_a_decline_and_the_next_one_is_tried(script: Path) -> None:
    result = loop(script, ScriptedRunner(script, booms(script)), patterns=(Raises(), Boom())).run()
    assert (result.status, result.stop_reason) == (Status.FIXED, StopReason.PASSING)
    first = result.attempts[0]
    assert first.pattern == "boom"
    assert [d.pattern for d in first.declines] == ["raises"]
    assert "KeyError" in first.declines[0].reason
    assert any("raises pattern raised KeyError" in note for note in result.notes)


def test_only_a_raising_pattern_gives_up_without_a_traceback(script: Path) -> None:
    result = loop(script, ScriptedRunner(script, booms(script)), patterns=(Raises(),)).run()
    assert result.status is Status.GAVE_UP
    assert result.attempts[0].declines[0].pattern == "raises"


class Candidates(Boom):
    """Offers a wrong replacement first, then the right one as an alternative."""

    ID = "candidates"

    def locate(self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources) -> Site | Decline:
        found = super().locate(failure, match, evidence, sources)
        if isinstance(found, Decline) or match["name"] != "boom1":
            return found
        wrong = Site(**{**found.__dict__, "rewrite": Defuse("bad"), "evidence": {"candidate": "first"}})
        return Site(**{**wrong.__dict__, "alternatives": (found,)})


def test_a_candidate_whose_rerun_fails_is_discarded_and_the_next_is_tried(script: Path) -> None:
    def behave(source: str, request: RunRequest) -> RunResult:
        if '"bad"' in source:
            return failed(script, "BoomError", "boom1", 1, (0, 0, 1))
        return booms(script)(source, request)

    result = loop(script, ScriptedRunner(script, behave), patterns=(Candidates(),)).run()
    assert (result.status, result.stop_reason) == (Status.FIXED, StopReason.PASSING)
    assert [(a.outcome, a.applied) for a in result.attempts] == [
        (Outcome.FAILED_SAME, False), (Outcome.FAILED_OTHER, True), (Outcome.PASSED, True),
    ]
    assert any("(first) was discarded" in note and "next candidate" in note for note in result.notes)
    assert result.verified[script].decode() == 'a = "ok"\nb = "ok"\nprint(a, b)\n'


def test_candidates_stay_within_the_attempt_budget(script: Path) -> None:
    def behave(source: str, request: RunRequest) -> RunResult:
        if '"bad"' in source:
            return failed(script, "BoomError", "boom1", 1, (0, 0, 1))
        return booms(script)(source, request)

    result = loop(script, ScriptedRunner(script, behave), patterns=(Candidates(),), max_attempts=1).run()
    assert result.status is Status.GAVE_UP
    assert len(result.attempts) == 1


class Diagnosed(Boom):
    """Toy diagnose-only pattern: recognises a BoomError and never edits."""

    ID = "boom-diagnosed"
    FIXES = False
    REMEDY = "defuse it by hand"

    def locate(self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources) -> Site | Decline:
        return self.decline("diagnosed, never edited", diagnosis=self.remedy())


def stopped() -> RunResult:
    return RunResult(RunStatus.STOPPED, 0, 0.1, None, Evidence(outcome="stopped", exit_code=0))


def timed_out() -> RunResult:
    return RunResult(RunStatus.TIMEOUT, None, 10.0, None, None)


@pytest.mark.parametrize(("outcome", "reason"), [
    (lambda script: passed(), StopReason.PASSING),
    (lambda script: stopped(), StopReason.TIMEOUT),
    (lambda script: timed_out(), StopReason.TIMEOUT),
    (lambda script: failed(script, "BoomError", "boom1"), StopReason.DIAGNOSED),
    (lambda script: failed(script, "ValueError", "no pattern knows this"), StopReason.NO_PATTERN),
    (lambda script: failed(script, "ValueError", "in a library", user=False), StopReason.NO_USER_FRAME),
    (lambda script: failed(script, "ModuleNotFoundError", "No module named 'wandb'"), StopReason.ENVIRONMENT),
])
def test_fix_and_doctor_stop_for_the_same_reason(
    script: Path, outcome: Callable[[Path], RunResult], reason: StopReason
) -> None:
    """One setup and one ladder of stop reasons: a run that ends the same way stops fix and
    doctor for the same reason, with the same limits in the report."""
    config = RunConfig(batch_size=3, max_batches=4, max_steps=5, timeout=6.0)
    reports = []
    for command in ("fix", "doctor"):
        runner = ScriptedRunner(script, lambda source, request: outcome(script))
        common = dict(script=script, cwd=script.parent, python=sys.executable, config=config)
        if command == "fix":
            report = api.repair(api.FixOptions(**common, dry_run=True), runner=runner, patterns=(Diagnosed(),))  # type: ignore[arg-type]
        else:
            report = api.doctor(api.DoctorOptions(**common), runner=runner, patterns=(Diagnosed(),))  # type: ignore[arg-type]
        (request,) = runner.requests
        assert (request.limits, request.timeout) == (Limits(3, 4, 5), 6.0)
        reports.append(report)
    fix, doctor = reports
    assert fix.stop_reason is doctor.stop_reason is reason
    assert fix.run_limits == doctor.run_limits and fix.run_limits.batch_size == 3
    assert [a.failure_file for a in fix.attempts] == [a.failure_file for a in doctor.attempts]


def test_the_stop_reason_ladder() -> None:
    frame = Frame("/p/train.py", 1, "<module>", "x", user=True)
    run = RunResult(RunStatus.FAILED, 1, 0.1, Failure("BoomError", "boom1", frames=(frame,)), None)
    (candidate,) = candidates(run.failure, (Boom(),))  # type: ignore[arg-type]
    assert stop_reason(run, [candidate], []) is StopReason.NO_PATTERN  # a fixing pattern that found nothing
    assert stop_reason(run, [candidate], [Decline("boom", "no", diagnosis="do this")]) is StopReason.DIAGNOSED
    (diagnosed,) = candidates(run.failure, (Diagnosed(),))  # type: ignore[arg-type]
    assert stop_reason(run, [diagnosed], []) is StopReason.DIAGNOSED
    assert run_ended(run) is None and run_ended(passed()) is StopReason.PASSING
    assert run_ended(stopped()) is run_ended(timed_out()) is StopReason.TIMEOUT


def test_locate_answers_one_type(script: Path) -> None:
    """A rewrite to verify with the declines before it, or none with every decline."""

    class Declines(Boom):
        ID = "declines"

        def locate(self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources) -> Site | Decline:
            return self.decline("not this one")

    repair = loop(script, ScriptedRunner(script, booms(script)), patterns=(Declines(), Boom()))
    failure = failed(script, "BoomError", "boom1").failure
    assert failure is not None
    ranked = candidates(failure, repair.options.patterns)
    located = repair._locate(failure, ranked, None, set())
    assert isinstance(located, Located) and located.rewrite is not None
    assert located.rewrite.site.pattern == "boom" and b'"ok"' in located.rewrite.new_bytes
    assert [d.reason for d in located.declines] == ["not this one"]
    nothing = repair._locate(failure, ranked[:1], None, set())
    assert nothing.rewrite is None and [d.pattern for d in nothing.declines] == ["declines"]
