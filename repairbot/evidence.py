"""What one traced run recorded, read from the harness's JSON (schema ``repairbot.evidence/1``).

The harness (``trace/harness/``) writes plain JSON; this module turns it into typed values
for the loop and the patterns, without importing torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from repairbot.tracebacks import worker_exception, worker_frames
from repairbot.types import Failure, Frame, HealthFinding

SCHEMA = "repairbot.evidence/1"


@dataclass(frozen=True)
class LinearTrace:
    """One ``nn.Linear`` of the run: where it was built and the input it last saw."""

    index: int
    type: str
    in_features: int
    out_features: int
    site: Frame | None
    input_shape: tuple[int, ...] | None
    calls: int
    layer_site: int | None = None  # index into Evidence.layer_sites

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "in_features": self.in_features,
            "out_features": self.out_features,
            "site": frame_to_json(self.site) if self.site else None,
            "input_shape": list(self.input_shape) if self.input_shape is not None else None,
            "calls": self.calls,
        }


@dataclass(frozen=True)
class PassedArgument:
    """One step of a size's way into a layer: the argument given for ``param`` of an
    ``__init__`` at the constructor's call site (``where``: the argument expression's span)."""

    param: str
    expr: str
    value: Any
    where: Frame
    values: Mapping[str, Any] = field(default_factory=dict)  # its names' traced values


@dataclass(frozen=True)
class LayerSite:
    """Where one sized layer (any kind: Linear, Conv*d, LSTM, Embedding, a norm...) was built.

    ``args`` and ``exprs``: its size arguments by name (``in_features``, ``in_channels``,
    ``input_size``...), the built value and the source text; ``values``: the traced value of
    every name, attribute chain and constant subscript of those expressions, evaluated in the
    constructing frame without running code; ``scope``: the whole numbers in scope there
    (locals, and the plain attributes of the objects the arguments read: ``self.seq_len``,
    ``cfg.emb``, ``cfg["emb_dim"]``); ``chain``: for ``__init__`` parameters, the arguments at
    the constructor's call sites, outermost last.
    """

    index: int
    type: str
    site: Frame | None
    args: Mapping[str, Any] = field(default_factory=dict)
    exprs: Mapping[str, str] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)
    scope: Mapping[str, int] = field(default_factory=dict)
    chain: tuple[PassedArgument, ...] = ()


def _layer_site_from_json(index: int, raw: Mapping[str, Any]) -> LayerSite:
    def value_map(items: Any) -> dict[str, Any]:
        return {str(v["expr"]): v.get("value") for v in items or () if isinstance(v, Mapping) and "expr" in v}

    chain = tuple(
        PassedArgument(
            param=str(step.get("param", "")), expr=str(step.get("expr") or ""), value=step.get("value"),
            where=frame_from_json(step), values=value_map(step.get("values")),
        )
        for step in raw.get("chain") or () if isinstance(step, Mapping)
    )
    return LayerSite(
        index=int(raw.get("index", index)),
        type=str(raw.get("type", "")),
        site=frame_from_json(raw["site"]) if raw.get("site") else None,
        args=dict(raw.get("args") or {}),
        exprs={str(k): str(v) for k, v in (raw.get("exprs") or {}).items() if v is not None},
        values=value_map(raw.get("values")),
        scope={str(k): v for k, v in (raw.get("scope") or {}).items() if type(v) is int},
        chain=chain,
    )


@dataclass(frozen=True)
class Evidence:
    """Everything a run traced; ``failure`` is None for a run that passed."""

    outcome: str
    exit_code: int | None
    failure: Failure | None = None
    # Per frame index of ``failure.frames``: the described locals and device-like globals.
    scopes: Mapping[int, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    failing_linear: int | None = None
    failing_module: Mapping[str, Any] | None = None
    linears: tuple[LinearTrace, ...] = ()
    layer_sites: tuple[LayerSite, ...] = ()
    limits: Mapping[str, Any] = field(default_factory=dict)
    progress: tuple[int, ...] = ()
    imported_files: tuple[str, ...] = ()
    environment: Mapping[str, Any] = field(default_factory=dict)
    stopped_at: Frame | None = None
    shadowed_files: tuple[str, ...] = ()
    suppressed_deletes: tuple[str, ...] = ()
    probes: frozenset[str] = frozenset()  # the opt-in probes that were on
    # The records of the patterns' own probes, by their evidence.json key, as traced (each
    # pattern reads and types its own; None or absent: the probe did not run).
    probe_records: Mapping[str, Any] = field(default_factory=dict)
    # What the health checks saw (None: they were off); file paths absolute, as traced.
    health: tuple[HealthFinding, ...] | None = None

    @property
    def linear(self) -> LinearTrace | None:
        """The Linear whose forward raised, if one did."""
        if self.failing_linear is None or not 0 <= self.failing_linear < len(self.linears):
            return None
        return self.linears[self.failing_linear]

    def layer_site(self, linear: LinearTrace) -> LayerSite | None:
        """The construction record of a traced Linear, when the run made one."""
        index = linear.layer_site
        return self.layer_sites[index] if index is not None and 0 <= index < len(self.layer_sites) else None

    @property
    def forced(self) -> tuple[str, ...]:
        """What the run's limits changed (batch sizes forced down), with where."""
        return tuple(
            f"{item.get('what')} at {item.get('site')}" if item.get("site") else str(item.get("what"))
            for item in self.limits.get("forced", ())
        )

    def scope(self, frame: Frame) -> Mapping[str, Mapping[str, Any]]:
        """Locals and device-like globals recorded for a frame of the failure."""
        if self.failure is None:
            return {}
        for index, candidate in enumerate(self.failure.frames):
            if candidate is frame or candidate == frame:
                return self.scopes.get(index, {})
        return {}


def frame_from_json(data: Mapping[str, Any]) -> Frame:
    return Frame(
        file=str(data.get("file", "")),
        line=int(data.get("line") or 0),
        function=str(data.get("function") or ""),
        code=data.get("code"),
        user=bool(data.get("user", False)),
        col=data.get("col"),
        end_line=data.get("end_line"),
        end_col=data.get("end_col"),
    )


def frame_to_json(frame: Frame) -> dict[str, Any]:
    data: dict[str, Any] = {"file": frame.file, "line": frame.line, "function": frame.function}
    if frame.code is not None:
        data["code"] = frame.code
    if frame.col is not None:
        data.update(col=frame.col, end_line=frame.end_line, end_col=frame.end_col)
    return data


def failure_from_json(data: Mapping[str, Any]) -> tuple[Failure, dict[int, dict[str, Any]]]:
    """The failure of an ``exception`` record, and the scopes of its user frames."""
    frames: list[Frame] = []
    scopes: dict[int, dict[str, Any]] = {}
    for index, raw in enumerate(data.get("frames", ())):
        frames.append(frame_from_json(raw))
        if "locals" in raw or "globals" in raw:
            scopes[index] = {"locals": raw.get("locals", {}), "globals": raw.get("globals", {})}
    message = str(data.get("message", ""))
    causes = tuple(failure_from_json(cause)[0] for cause in data.get("causes", ()))
    # a DataLoader worker's error: the worker's own exception, not the loader's wrapper
    exc_type, shown = worker_exception(message) or (str(data.get("type", "Exception")), message)
    failure = Failure(
        exc_type=exc_type,
        message=shown,
        frames=tuple(frames),
        worker_frames=worker_frames(message),
        causes=causes,
    )
    return failure, scopes


def _shape(value: Sequence[int] | None) -> tuple[int, ...] | None:
    return tuple(int(v) for v in value) if value is not None else None


def _rebase(frame: Frame, root: Path) -> Frame:
    if not frame.file or frame.file.startswith("<") or Path(frame.file).is_absolute():
        return frame
    return replace(frame, file=str(root / frame.file))


def _rebase_failure(failure: Failure, rebase: Callable[[Frame], Frame]) -> Failure:
    return replace(
        failure,
        frames=tuple(map(rebase, failure.frames)),
        worker_frames=tuple(map(rebase, failure.worker_frames)),
        causes=tuple(_rebase_failure(c, rebase) for c in failure.causes),
    )


def evidence_from_json(data: Mapping[str, Any], root: Path | None = None) -> Evidence:
    """Typed evidence; ``root`` anchors relative paths (recorded cases store them relative)."""
    evidence = _evidence_from_json(data)
    if root is None:
        return evidence

    def rebase(frame: Frame) -> Frame:
        return _rebase(frame, root)

    def rebase_site(site: str) -> str:
        """A ``file:line`` string of a module description."""
        file, _, line = site.rpartition(":")
        return f"{rebase(Frame(file=file, line=0)).file}:{line}" if file and line.isdigit() else site

    def rebase_description(value: Mapping[str, Any]) -> dict[str, Any]:
        described = dict(value)
        if isinstance(value.get("site"), str):
            described["site"] = rebase_site(value["site"])
        return described

    def rebase_scope(scope: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        return {
            kind: {name: rebase_description(value) for name, value in names.items()}
            for kind, names in scope.items()
        }

    def rebase_record(record: Mapping[str, Any]) -> dict[str, Any]:
        # probe records carry frames as plain mappings ("site", "module_site")
        rebased = dict(record)
        for key, value in record.items():
            if isinstance(value, Mapping) and "file" in value and "line" in value:
                frame = rebase(frame_from_json(value))
                rebased[key] = {**value, "file": frame.file}
        return rebased

    return replace(
        evidence,
        failure=_rebase_failure(evidence.failure, rebase) if evidence.failure else None,
        probe_records={
            key: [rebase_record(item) if isinstance(item, Mapping) else item for item in value]
            if isinstance(value, list | tuple) else value
            for key, value in evidence.probe_records.items()
        },
        scopes={index: rebase_scope(scope) for index, scope in evidence.scopes.items()},
        failing_module=rebase_description(evidence.failing_module) if evidence.failing_module else None,
        linears=tuple(replace(lt, site=rebase(lt.site) if lt.site else None) for lt in evidence.linears),
        layer_sites=tuple(
            replace(
                ls, site=rebase(ls.site) if ls.site else None,
                chain=tuple(replace(step, where=rebase(step.where)) for step in ls.chain),
            )
            for ls in evidence.layer_sites
        ),
        stopped_at=rebase(evidence.stopped_at) if evidence.stopped_at else None,
        health=tuple(
            replace(h, file=rebase(Frame(file=h.file, line=0)).file) if h.file else h for h in evidence.health
        ) if evidence.health is not None else None,
        imported_files=tuple(
            str(root / f) if not Path(f).is_absolute() else f for f in evidence.imported_files
        ),
    )


def _evidence_from_json(data: Mapping[str, Any]) -> Evidence:
    if data.get("schema") != SCHEMA:
        raise ValueError(f"not a repairbot evidence record: schema {data.get('schema')!r}")
    failure = None
    scopes: dict[int, dict[str, Any]] = {}
    failing_linear = None
    failing_module = None
    exception = data.get("exception")
    if exception:
        failure, scopes = failure_from_json(exception)
        failing_linear = exception.get("failing_linear")
        failing_module = exception.get("failing_module")
    linears = tuple(
        LinearTrace(
            index=int(raw.get("index", i)),
            type=str(raw.get("type", "Linear")),
            in_features=int(raw.get("in_features") or 0),
            out_features=int(raw.get("out_features") or 0),
            site=frame_from_json(raw["site"]) if raw.get("site") else None,
            input_shape=_shape(raw.get("input_shape")),
            calls=int(raw.get("calls") or 0),
            layer_site=raw.get("layer_site") if type(raw.get("layer_site")) is int else None,
        )
        for i, raw in enumerate(data.get("linears", ()))
    )
    layer_sites = tuple(
        _layer_site_from_json(i, raw) for i, raw in enumerate(data.get("layer_sites") or ()) if isinstance(raw, Mapping)
    )
    files = data.get("files") or {}
    stopped = data.get("stopped_at")
    return Evidence(
        outcome=str(data.get("outcome", "failed")),
        exit_code=data.get("exit_code"),
        failure=failure,
        scopes=scopes,
        failing_linear=failing_linear,
        failing_module=failing_module,
        linears=linears,
        layer_sites=layer_sites,
        limits=data.get("limits") or {},
        progress=tuple(data.get("progress") or ()),
        imported_files=tuple(data.get("imported_files", ())),
        environment=data.get("environment") or {},
        stopped_at=frame_from_json(stopped) if stopped else None,
        shadowed_files=tuple(files.get("shadowed", ())),
        suppressed_deletes=tuple(files.get("suppressed_deletes", ())),
        probes=frozenset(data.get("probes") or ()),
        probe_records={key: value for key, value in data.items() if key not in _CORE_KEYS},
        health=health_from_json(data["health"]) if data.get("health") is not None else None,
    )


# What the harness's core writes; every other key of evidence.json is a pattern probe's.
_CORE_KEYS = frozenset({
    "schema", "outcome", "exit_code", "exception", "stopped_at", "limits", "progress", "linears",
    "layer_sites", "probes", "health", "imported_files", "environment", "files",
})


def health_from_json(items: Sequence[Mapping[str, Any]]) -> tuple[HealthFinding, ...]:
    """The health findings of a run (a malformed item is skipped, never fatal)."""
    findings: list[HealthFinding] = []
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            continue
        line = item.get("line")
        fix = item.get("fix")
        findings.append(HealthFinding(
            id=item["id"],
            message=str(item.get("message", "")),
            file=str(item["file"]) if item.get("file") else None,
            line=int(line) if isinstance(line, int) and line > 0 else None,
            evidence=dict(item.get("evidence") or {}),
            fix=dict(fix) if isinstance(fix, Mapping) else None,
            level="information" if item.get("level") == "information" else "warning",
        ))
    return tuple(findings)
