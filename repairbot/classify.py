"""From a failure to ranked pattern candidates, by each pattern's signatures.

The same classifier serves a traced run (structured evidence) and a raw log
(``repairbot classify``): both are reduced to a ``Failure`` first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from repairbot.pattern import Pattern, type_matches
from repairbot.tracebacks import parse_log
from repairbot.types import Failure, Frame


@dataclass(frozen=True)
class Candidate:
    """A pattern whose signature matched, with the match and the failure it matched."""

    pattern: Pattern
    match: re.Match[str]
    failure: Failure  # the failure itself, or the cause in its chain that matched
    depth: int  # 0 for the failure itself, n for its n-th cause


def candidates(failure: Failure, patterns: Iterable[Pattern]) -> list[Candidate]:
    """Patterns that recognise the failure, best first.

    A match on the exception that ended the run ranks above a match on an exception earlier in
    its chain (a script that re-raises ``RuntimeError("training failed") from error`` is still
    classified by the original error); among equals, the catalogue's order.
    """
    chain = (failure, *failure.causes)
    found: list[Candidate] = []
    for pattern in patterns:
        for depth, link in enumerate(chain):
            match = pattern.match(link)
            if match is not None:
                found.append(Candidate(pattern, match, link, depth))
                break
    return sorted(found, key=lambda c: c.depth)


@dataclass(frozen=True)
class Classification:
    failure: Failure | None
    candidates: tuple[Candidate, ...]

    @property
    def pattern(self) -> str | None:
        return self.candidates[0].pattern.ID if self.candidates else None


def ending_frame(failure: Failure) -> str | None:
    """For a traceback without an exception line: ``function (file:line)`` of its deepest frame."""
    if failure.exc_type or failure.message or not failure.frames:
        return None
    last = failure.frames[-1]
    return f"{last.function or '?'} ({last.file}:{last.line})"


def frame_candidates(failure: Failure, patterns: Iterable[Pattern]) -> list[Candidate]:
    """The pattern a frames-only traceback's deepest frame names, where it names one."""
    if ending_frame(failure) is None:
        return []
    # Most library frames raise many failures (``torch.autograd.backward``: a graph freed or
    # missing, an in-place change, a hook's error...) and classify nothing; a pattern names the
    # few that raise its failure alone (``Pattern.RAISING_FRAMES``).
    last = failure.frames[-1]
    path = last.file.replace("\\", "/")
    empty = re.compile("").match("")
    assert empty is not None
    return [Candidate(p, empty, failure, 0) for p in patterns if any(_raises_at(last, path, f) for f in p.RAISING_FRAMES)]


def _raises_at(frame: Frame, path: str, raising: tuple[str, ...]) -> bool:
    """Whether ``frame`` (its file as ``path``, with ``/``) is the raising frame ``raising``
    names: its path ending and function, and its source line's start where one is given."""
    end, function, *line = raising
    return path.endswith(end) and frame.function == function and all((frame.code or "").startswith(start) for start in line)


def classify_log(text: str, patterns: Iterable[Pattern]) -> Classification:
    """Classify the failure a raw log (traceback, CI log, issue text) reports; a traceback
    without its exception line by the library frame it ends in."""
    failure = parse_log(text)
    if failure is None:
        return Classification(None, ())
    chosen = tuple(patterns)
    return Classification(failure, tuple(candidates(failure, chosen) or frame_candidates(failure, chosen)))


# Failures of the machine, not of the script: a missing file or package, the network.
_ENVIRONMENT_TYPES = (
    "ModuleNotFoundError", "FileNotFoundError", "URLError", "HTTPError", "ConnectionError",
    "ConnectionRefusedError", "ConnectionResetError", "gaierror", "ReadTimeout", "ConnectTimeout",
    "SSLError", "MaxRetryError", "NewConnectionError", "LocalEntryNotFoundError",
)
_ENVIRONMENT_MESSAGES = re.compile(
    r"No module named|Network is unreachable|Name or service not known|Temporary failure in name"
    r" resolution|Connection refused|couldn't connect to|Failed to establish a new connection"
    r"|Found no NVIDIA driver|No CUDA GPUs are available|Torch not compiled with CUDA enabled"
    r"|CUDA driver version is insufficient|no kernel image is available"
    r"|Cannot access accelerator device when none is available|Cannot get CUDA generator without ATen_cuda",
    re.IGNORECASE,
)


def environment_problem(failure: Failure) -> str | None:
    """A one-line reason when the failure is the environment's (data, packages, network, GPU)."""
    for link in (failure, *failure.causes):
        if any(type_matches(link.exc_type, t) for t in _ENVIRONMENT_TYPES) or (
            link.exc_type in ("ImportError", "OSError", "RuntimeError", "AssertionError")
            and _ENVIRONMENT_MESSAGES.search(link.message)
        ):
            return link.headline
    return None
