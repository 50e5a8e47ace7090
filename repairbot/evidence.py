"""What one traced run recorded, read from the harness's JSON (schema ``repairbot.evidence/1``).

The harness (``trace/harness/``) writes plain JSON; this module turns it into typed values
for the loop and the patterns, without importing torch. It is parsed here once, tolerantly: a
field that is missing or of the wrong JSON type reads as None (or empty), never as an
exception, so no pattern reads the record by string key. Records that a report quotes as the
run wrote them (a traced value, the failing module, the environment) keep it in ``raw``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from repairbot.trace.harness.evidence_keys import CORE_KEYS, SCHEMA
from repairbot.tracebacks import worker_exception, worker_frames
from repairbot.types import Failure, Frame, HealthFinding


def _int(value: Any) -> int | None:
    """A whole number of the record (never a bool, which JSON keeps apart)."""
    return value if type(value) is int else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _ints(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list | tuple) or not all(type(v) is int for v in value):
        return None
    return tuple(value)


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


@dataclass(frozen=True)
class DescribedValue:
    """One traced value as the harness's ``_describe`` records it; which fields are set
    depends on ``kind``:

    - ``tensor``: ``shape``, ``dtype`` (``float32``), ``device`` (``cuda:0``), ``requires_grad``
      (each None when it could not be read);
    - ``module``: ``type`` (the class name), ``devices`` (of its parameters and buffers),
      ``site`` (``file:line`` where it was built);
    - ``device`` (a ``torch.device``), ``device-string`` (``"cuda:1"``), ``number``: ``value``;
    - ``tensor-list`` (a list of tensors, losses appended per step): ``length``, ``element`` (the
      last one).

    ``raw`` is the record itself, for reports that quote it (``to_json``)."""

    kind: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    device: str | None = None
    requires_grad: bool | None = None
    type: str | None = None
    devices: tuple[str, ...] = ()
    site: str | None = None
    value: int | float | str | None = None
    length: int | None = None
    element: DescribedValue | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def is_module(self) -> bool:
        return self.kind == "module"

    @property
    def is_device(self) -> bool:
        """A ``torch.device`` or a device string (``"cuda"``)."""
        return self.kind in ("device", "device-string")

    @classmethod
    def from_json(cls, raw: Any) -> DescribedValue | None:
        """None for a record that is not a description (no ``kind``)."""
        if not isinstance(raw, Mapping) or not isinstance(raw.get("kind"), str):
            return None
        value = raw.get("value")
        requires_grad = raw.get("requires_grad")
        return cls(
            kind=raw["kind"],
            shape=_ints(raw.get("shape")),
            dtype=_str(raw.get("dtype")),
            device=_str(raw.get("device")),
            requires_grad=requires_grad if isinstance(requires_grad, bool) else None,
            type=_str(raw.get("type")),
            devices=_strs(raw.get("devices")),
            site=_str(raw.get("site")),
            value=value if isinstance(value, int | float | str) and not isinstance(value, bool) else None,
            length=_int(raw.get("length")),
            element=cls.from_json(raw.get("element")),
            raw=dict(raw),
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)

    def quoted(self, *keys: str) -> dict[str, Any]:
        """Some of the record, in the order asked, as the run recorded it (for a report)."""
        return {key: self.raw[key] for key in keys if key in self.raw}


@dataclass(frozen=True)
class Scope:
    """What the run recorded of one user frame: its described locals, and the devices, device
    strings and modules among its globals."""

    locals: Mapping[str, DescribedValue] = field(default_factory=dict)
    globals: Mapping[str, DescribedValue] = field(default_factory=dict)

    def get(self, name: str) -> DescribedValue | None:
        """A name as the frame sees it: a local, else a global."""
        found = self.locals.get(name)
        return found if found is not None else self.globals.get(name)

    @classmethod
    def from_json(cls, frame: Mapping[str, Any]) -> Scope:
        def described(names: Any) -> dict[str, DescribedValue]:
            if not isinstance(names, Mapping):
                return {}
            return {str(n): v for n, raw in names.items() if (v := DescribedValue.from_json(raw)) is not None}

        return cls(locals=described(frame.get("locals")), globals=described(frame.get("globals")))


@dataclass(frozen=True)
class FailingModule:
    """The ``nn.Module`` whose ``forward`` raised: what ``_describe`` records of a module, the
    sizes it was built with (those it has: ``_module_details``), and the input it got (its
    range only for an integer tensor). ``raw`` is the record, for reports (``to_json``)."""

    type: str | None = None
    devices: tuple[str, ...] = ()
    site: str | None = None
    num_embeddings: int | None = None
    embedding_dim: int | None = None
    padding_idx: int | None = None
    in_features: int | None = None
    out_features: int | None = None
    in_channels: int | None = None
    out_channels: int | None = None
    num_features: int | None = None
    input_size: int | None = None
    hidden_size: int | None = None
    input_shape: tuple[int, ...] | None = None
    input_dtype: str | None = None
    input_min: int | None = None
    input_max: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, raw: Any) -> FailingModule | None:
        if not isinstance(raw, Mapping) or not raw:
            return None
        return cls(
            type=_str(raw.get("type")), devices=_strs(raw.get("devices")), site=_str(raw.get("site")),
            num_embeddings=_int(raw.get("num_embeddings")), embedding_dim=_int(raw.get("embedding_dim")),
            padding_idx=_int(raw.get("padding_idx")), in_features=_int(raw.get("in_features")),
            out_features=_int(raw.get("out_features")), in_channels=_int(raw.get("in_channels")),
            out_channels=_int(raw.get("out_channels")), num_features=_int(raw.get("num_features")),
            input_size=_int(raw.get("input_size")), hidden_size=_int(raw.get("hidden_size")),
            input_shape=_ints(raw.get("input_shape")), input_dtype=_str(raw.get("input_dtype")),
            input_min=_int(raw.get("input_min")), input_max=_int(raw.get("input_max")),
            raw=dict(raw),
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


@dataclass(frozen=True)
class ForcedLimit:
    """One thing the limits changed (``DataLoader batch_size 64 -> 2``), with where."""

    what: str | None
    site: str | None  # file:line

    def __str__(self) -> str:
        return f"{self.what} at {self.site}" if self.site else str(self.what)


@dataclass(frozen=True)
class LastBatch:
    """A DataLoader whose cut passes end with the real run's last, partial batch."""

    size: int | None  # the last batch's samples: len(sampler) % batch_size
    dataset: int | None  # the samples of one pass: len(sampler), len(dataset) for the default samplers
    batch_size: int | None  # the loader's own batch size
    site: str | None  # file:line where the loader was built


@dataclass(frozen=True)
class LeftLoop:
    """A loop the step budget ended early: the loop's and the step's ``file:line``."""

    loop: str | None
    kind: str | None
    step: str | None
    steps: int | None
    left: bool | None = None  # the loop was broken out of (False: it ended by itself first)


@dataclass(frozen=True)
class TracedLimits:
    """The limits as the run applied them and what they did (``limits`` of the record; the
    options asked for are ``trace.runner.Limits``)."""

    batch_size: int | None = None
    max_batches: int | None = None
    max_steps: int | None = None
    forced: tuple[ForcedLimit, ...] = ()
    steps: int | None = None
    free_steps: int | None = None
    batches: int | None = None  # batches the DataLoaders gave
    loaders_cut: int | None = None
    last_batches: tuple[LastBatch, ...] = ()
    left_loops: tuple[LeftLoop, ...] = ()

    @classmethod
    def from_json(cls, raw: Any) -> TracedLimits:
        if not isinstance(raw, Mapping):
            return cls()

        def items(key: str) -> list[Mapping[str, Any]]:
            value = raw.get(key)
            return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list | tuple) else []

        return cls(
            batch_size=_int(raw.get("batch_size")), max_batches=_int(raw.get("max_batches")),
            max_steps=_int(raw.get("max_steps")),
            forced=tuple(ForcedLimit(what=_str(i.get("what")), site=_str(i.get("site"))) for i in items("forced")),
            steps=_int(raw.get("steps")), free_steps=_int(raw.get("free_steps")), batches=_int(raw.get("batches")),
            loaders_cut=_int(raw.get("loaders_cut")),
            last_batches=tuple(
                LastBatch(size=_int(i.get("size")), dataset=_int(i.get("dataset")),
                          batch_size=_int(i.get("batch_size")), site=_str(i.get("site")))
                for i in items("last_batches")
            ),
            left_loops=tuple(
                LeftLoop(loop=_str(i.get("loop")), kind=_str(i.get("kind")), step=_str(i.get("step")),
                         steps=_int(i.get("steps")), left=i["left"] if isinstance(i.get("left"), bool) else None)
                for i in items("left_loops")
            ),
        )


@dataclass(frozen=True)
class Environment:
    """The interpreter, torch and GPUs the run saw. ``raw`` is the record, for reports."""

    python: str | None = None  # 3.11.7
    torch: str | None = None  # 2.13.0, without the local build tag
    torch_threads: int | None = None
    cuda_available: bool = False
    cuda_device_count: int | None = None
    devices: tuple[str, ...] = ()  # the GPUs' names
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, raw: Any) -> Environment:
        if not isinstance(raw, Mapping):
            return cls()
        return cls(
            python=_str(raw.get("python")), torch=_str(raw.get("torch")), torch_threads=_int(raw.get("torch_threads")),
            cuda_available=raw.get("cuda_available") is True, cuda_device_count=_int(raw.get("cuda_device_count")),
            devices=_strs(raw.get("devices")), raw=dict(raw),
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


@dataclass(frozen=True)
class RankRecord:
    """Which rank of a launched run (torchrun, accelerate launch) traced this evidence."""

    rank: int
    world_size: int
    failed_at: float | None = None  # wall-clock time its failure reached the harness

    @classmethod
    def from_json(cls, raw: Any) -> RankRecord | None:
        if not isinstance(raw, Mapping) or _int(raw.get("rank")) is None:
            return None
        failed_at = raw.get("failed_at")
        return cls(
            rank=int(raw["rank"]), world_size=_int(raw.get("world_size")) or 1,
            failed_at=float(failed_at) if isinstance(failed_at, int | float) else None,
        )


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


_Described = TypeVar("_Described", DescribedValue, FailingModule)


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
    scopes: Mapping[int, Scope] = field(default_factory=dict)
    failing_linear: int | None = None
    failing_module: FailingModule | None = None
    linears: tuple[LinearTrace, ...] = ()
    layer_sites: tuple[LayerSite, ...] = ()
    limits: TracedLimits = field(default_factory=TracedLimits)
    progress: tuple[int, ...] = ()
    imported_files: tuple[str, ...] = ()
    environment: Environment = field(default_factory=Environment)
    stopped_at: Frame | None = None
    shadowed_files: tuple[str, ...] = ()
    suppressed_deletes: tuple[str, ...] = ()
    probes: frozenset[str] = frozenset()  # the opt-in probes that were on
    # The records of the patterns' own probes, by their evidence.json key, as traced (each
    # pattern reads and types its own; None or absent: the probe did not run).
    probe_records: Mapping[str, Any] = field(default_factory=dict)
    # What the health checks saw (None: they were off); file paths absolute, as traced.
    health: tuple[HealthFinding, ...] | None = None
    rank: RankRecord | None = None  # under a launcher: the rank that traced it

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
        return tuple(str(item) for item in self.limits.forced)

    def scope(self, frame: Frame) -> Scope:
        """Locals and device-like globals recorded for a frame of the failure (empty when none)."""
        if self.failure is None:
            return Scope()
        for index, candidate in enumerate(self.failure.frames):
            if candidate is frame or candidate == frame:
                return self.scopes.get(index, Scope())
        return Scope()


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


def failure_from_json(data: Mapping[str, Any]) -> tuple[Failure, dict[int, Scope]]:
    """The failure of an ``exception`` record, and the scopes of its user frames."""
    frames: list[Frame] = []
    scopes: dict[int, Scope] = {}
    for index, raw in enumerate(data.get("frames", ())):
        frames.append(frame_from_json(raw))
        if "locals" in raw or "globals" in raw:
            scopes[index] = Scope.from_json(raw)
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
        harness_frame=frame_from_json(data["harness_frame"]) if isinstance(data.get("harness_frame"), Mapping) else None,
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

    def rebase_description(value: _Described) -> _Described:
        if value.site is None:
            return value
        site = rebase_site(value.site)
        return replace(value, site=site, raw={**value.raw, "site": site})

    def rebase_scope(scope: Scope) -> Scope:
        return Scope(
            locals={name: rebase_description(value) for name, value in scope.locals.items()},
            globals={name: rebase_description(value) for name, value in scope.globals.items()},
        )

    def rebase_value(value: Any) -> Any:
        # probe records carry frames as plain mappings ("site", "module_site"), also nested
        # in lists of records (a saved tensor's "forward" frames)
        if isinstance(value, Mapping) and "file" in value and "line" in value:
            return {**value, "file": rebase(frame_from_json(value)).file}
        if isinstance(value, Mapping):
            return rebase_record(value)
        if isinstance(value, list):
            return [rebase_value(item) for item in value]
        return value

    def rebase_record(record: Mapping[str, Any]) -> dict[str, Any]:
        return {key: rebase_value(value) for key, value in record.items()}

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
    scopes: dict[int, Scope] = {}
    failing_linear = None
    failing_module = None
    exception = data.get("exception")
    if exception:
        failure, scopes = failure_from_json(exception)
        failing_linear = exception.get("failing_linear")
        failing_module = FailingModule.from_json(exception.get("failing_module"))
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
        limits=TracedLimits.from_json(data.get("limits")),
        progress=tuple(data.get("progress") or ()),
        imported_files=tuple(data.get("imported_files", ())),
        environment=Environment.from_json(data.get("environment")),
        stopped_at=frame_from_json(stopped) if stopped else None,
        shadowed_files=tuple(files.get("shadowed", ())),
        suppressed_deletes=tuple(files.get("suppressed_deletes", ())),
        probes=frozenset(data.get("probes") or ()),
        # every key but those the harness's core writes is a pattern probe's
        probe_records={key: value for key, value in data.items() if key not in CORE_KEYS},
        health=health_from_json(data["health"]) if data.get("health") is not None else None,
        rank=RankRecord.from_json(data.get("rank")),
    )


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
