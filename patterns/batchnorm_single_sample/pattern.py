"""batchnorm-single-sample: a BatchNorm layer in training mode given one value per channel."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    ImportTable,
    Source,
    called_name,
    events,
    grad_off_around,
    is_torch_name,
    keyword_arg,
    local_tensors,
    one_line,
    own_nodes,
    place,
    recorded_local,
    resolve_site,
    shape_of,
    shape_text,
    source,
    walk,
)
from repairbot.codemod import append_keyword, replace_arg_value
from repairbot.edits import Edit, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence, LastBatch
from repairbot.pattern import Pattern, phrase, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame

_TRAINING_CALLS = ("backward", "step")


@dataclass(frozen=True)
class DropLast(Rewrite):
    """Adds ``drop_last=True`` to the DataLoader call (or turns ``drop_last=False`` into True)."""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        existing = keyword_arg(call, "drop_last")
        if existing is not None:
            return [Edit(call, replace_arg_value(call, existing, cst.Name("True")))]
        return [Edit(call, append_keyword(call, "drop_last", cst.Name("True")))]


@dataclass(frozen=True)
class Loader:
    """The DataLoader a failing loop iterates over, as the code builds it."""

    name: str
    call: cst.Call
    src: Source
    loop: cst.For
    loop_frame: Frame
    # the traced frame whose code builds the loader (its locals give a batch size written as a name)
    built_in: Frame | None = None

    def keyword(self, name: str) -> cst.BaseExpression | None:
        arg = keyword_arg(self.call, name)
        return arg.value if arg is not None else None

    def batch_size(self) -> cst.BaseExpression | None:
        arg = keyword_arg(self.call, "batch_size")
        if arg is not None:
            return arg.value
        positional = [a for a in self.call.args if a.keyword is None and not a.star]
        return positional[1].value if len(positional) > 1 else None


class BatchnormSingleSample(Pattern):
    """Drops the training DataLoader's last partial batch when it holds a single sample.

    What it fixes:
        A BatchNorm layer in training mode that meets a batch of one: the dataset's size is
        one more than a multiple of the batch size, so every epoch ends with a batch of a
        single sample. The training DataLoader gets ``drop_last=True``. A loop trains when its
        body calls ``backward`` or ``step``, or a function it calls does (``train_step(x, y)``, a
        closure such as ``train_step_fn = make_train_step_fn(...)`` seen in the traced frames).
        A batch of one made on purpose is diagnosed instead, with the remedy its facts prove:
        a batch size over 1 for a training loop (``batch_size=1``, a hand-written loop), never
        ``model.eval()``, which would stop the layer from training; ``model.eval()`` only for an
        evaluation (a loop under ``torch.no_grad()`` or in an evaluation function) or a single
        sample forwarded outside any loop with no training step after it. A loop that shows
        neither is diagnosed with its facts alone (the layer, the loop, the loader), and no
        change is proposed.

    Why it fails:
        ``ValueError: Expected more than 1 value per channel when training, got input size
        torch.Size([1, 256])`` (0.4: the size printed as a list, ``[1, 256]``). In training
        mode batch normalisation divides by the batch's variance, which one value per channel
        does not have (``[1, C, 1, 1]`` after a global pooling counts as one value too). The
        tracing run records the failing BatchNorm (its size, where it was built) and the
        tensors of the user's frames; the loop and its DataLoader come from the code.

    Example:
        ``DataLoader(train_set, batch_size=2, shuffle=True)`` over 3 samples: the second batch
        has one sample; the fix is ``DataLoader(train_set, batch_size=2, shuffle=True,
        drop_last=True)``.

    Fix safety:
        Unsafe: each epoch skips the last ``len(dataset) % batch_size`` samples (different
        ones each epoch when the loader shuffles), and a training loop that counts batches
        sees one fewer. Made only for a loader of a loop that trains (calls ``backward`` or
        ``step``), with a batch size over 1 and no sampler of its own, whose dataset holds more
        than one batch (the harness's record of the loader's last batch; without one, a full
        batch seen earlier in the run): a dataset smaller than one batch is diagnosed, since
        ``drop_last`` would leave nothing to train on.

    Not handled:
        Loaders built by a library or passed through several functions; a batch of one made
        by a ``batch_sampler`` or a custom collate; BatchNorm in a hand-written loop without a
        DataLoader (diagnosed: batches of more than one sample when the loop trains).
    """

    ID = "batchnorm-single-sample"
    TITLE = "BatchNorm in training mode given a batch of one"
    TAGS = frozenset({"data", "batch"})
    APPLICABILITY = Applicability.UNSAFE
    EVIDENCE = frozenset({"failing_module", "locals", "limits"})
    SIGNATURES = (
        signature(
            ("ValueError", "RuntimeError"),
            phrase("Expected more than 1 value per channel when training, got input size")
            + r"\s*(?:torch\.Size\()?\[(?P<size>[\d,\s]*)\]",
        ),
    )
    REWRITES = (DropLast,)
    # _verify_batch_size since torch 1.1; before, batch_norm raised it itself (and batch_norm
    # still raises every other failure of torch.batch_norm: only its own raise line proves it)
    RAISING_FRAMES = (
        ("torch/nn/functional.py", "_verify_batch_size"),
        ("torch/nn/functional.py", "batch_norm", "raise ValueError('Expected more than 1 value per channel"),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        size = [int(v) for v in re.findall(r"\d+", match["size"])]
        module = evidence.failing_module if evidence else None
        norm = f"nn.{module.type}({module.num_features})" if module and module.type else "a BatchNorm layer"
        built = resolve_site(evidence, module.site) if module else None
        norm += f" built at {place(built)}" if built else ""
        got = f"{norm} in training mode received {shape_text(size)}: one value per channel"
        if not size or size[0] != 1:
            return self.decline(
                f"{got} (a spatial size of 1 after pooling)",
                diagnosis=("Give the layer more than one value per channel: a batch size over 1, or no global "
                           "pooling before it, or GroupNorm/LayerNorm, which do not depend on the batch."),
                at=frame,
            )
        loader = _loader(failure, evidence, sources)
        if loader is None:
            return self._without_loader(failure, norm, got, sources)
        at = loader.loop_frame
        built_at = Frame(file=str(loader.src.path), line=loader.src.line(loader.call), user=True)
        role = _loop_role(loader.loop, loader.src, failure, sources)
        if role is None:
            return self.decline(
                f"{got}, in the loop at {place(at)} over {loader.name} (built at {place(built_at)}); the code shows "
                "neither a training step (backward, step) nor an evaluation (no_grad, an evaluation function) there",
                diagnosis=(f"{norm} ran in training mode on a batch of one sample in the loop at {place(at)}, over "
                           f"{loader.name} built at {place(built_at)}. Whether that loop trains or evaluates is not "
                           "shown by the code, so no change is proposed."),
                at=at,
            )
        if role == "evaluates":
            return self.decline(
                f"{got}: the loop at {place(at)} over {loader.name} evaluates (no backward or step, autograd off or "
                "an evaluation function), yet the model is in training mode",
                diagnosis=(f"Call model.eval() before the loop at {place(at)} (and model.train() after it): "
                           "evaluation must use the running statistics, whatever the batch size."),
                at=at,
            )
        batch = loader.batch_size()
        if batch is None or _batch_size_value(batch, evidence, loader.built_in) == 1:
            return self.decline(
                f"{got}: {loader.name} (built at {place(built_at)}) makes batches of one",
                diagnosis=(f"Train with a batch size over 1 in the DataLoader at {place(built_at)}, or replace "
                           "BatchNorm by GroupNorm/LayerNorm if single-sample batches are needed."),
                at=built_at,
            )
        for keyword in ("sampler", "batch_sampler", "collate_fn"):
            if loader.keyword(keyword) is not None:
                return self.decline(f"{got}; {loader.name} has its own {keyword}, which may make the batch of one",
                                    diagnosis=_train_with_more(loader, built_at, f"its own {keyword}"), at=built_at)
        drop = loader.keyword("drop_last")
        if drop is not None and not (isinstance(drop, cst.Name) and drop.value == "False"):
            return self.decline(f"{got}; {loader.name} already sets drop_last",
                                diagnosis=_train_with_more(loader, built_at, f"drop_last={loader.src.code(drop)}"),
                                at=built_at)
        seen = (evidence.limits.batches if evidence else None) or 0
        planned = _last_batch_plan(evidence, built_at)
        if planned is not None and (planned.dataset or 0) <= (planned.batch_size or 0):
            # the whole dataset is one partial batch: drop_last would train on nothing, and pass
            return self.decline(
                f"{got}: {loader.name} holds {planned.dataset} sample(s), fewer than one batch of "
                f"{planned.batch_size}; drop_last would leave no batch at all",
                diagnosis=f"Check the dataset behind {loader.name} (built at {place(built_at)}): it holds "
                          f"{planned.dataset} sample(s), fewer than one batch.",
                at=built_at,
            )
        if planned is None and seen < 2:
            return self.decline(
                f"{got}: the first batch of {loader.name} already has one sample, so the dataset is smaller than a "
                "batch; drop_last would leave no batch at all",
                diagnosis=f"Check the dataset behind {loader.name} (built at {place(built_at)}): it holds a single sample.",
                at=built_at,
            )
        call = loader.call
        old = one_line(loader.src.module, call)
        written = loader.src.code(batch)
        return Site(
            pattern=self.ID,
            file=str(loader.src.path),
            span=loader.src.positions[call],
            rewrite=DropLast(),
            summary=f"{'Set' if drop is not None else 'Added'} drop_last=True {'in' if drop is not None else 'to'} {old}: its last batch holds a single sample, which {norm} cannot normalise",
            applicability=self.APPLICABILITY,
            evidence={"norm": module.to_json() if module else {}, "input_size": size, "loader": loader.name,
                      "loader_site": place(built_at), "batch_size": written, "batches_seen": seen},
            evidence_text=(
                f"the loop at {place(at)} over {loader.name} (batch_size={written}) got a batch of one after "
                f"{seen - 1} full batch(es) in this run: the last partial batch"
            ),
            notes=(
                f"drop_last=True skips the last len(dataset) % {written} samples of every epoch (different ones "
                "when the loader shuffles): one fewer batch per epoch.",
            ),
        )

    def _without_loader(self, failure: Failure, norm: str, got: str, sources: Sources) -> Decline:
        """A batch of one that no DataLoader loop of the code makes: a batch size over one where the
        user's frames show a training step (a loop that trains, a backward or step after the call),
        ``model.eval()`` only for a single-sample inference (no loop around the call, no training
        step after it, or autograd off), else the facts alone."""
        innermost: Frame | None = None
        in_loop = evaluates = False
        for frame in reversed(failure.frames):
            if not frame.user or frame.function == "forward":
                continue
            src = source(sources, frame.file)
            if src is None:
                continue
            here = Frame(file=frame.file, line=frame.line, user=True)
            innermost = innermost or here
            loops = [n for n in src.around(frame.line, cst.For, cst.While) if isinstance(n, cst.For | cst.While)]
            if _steps_after(src, frame.line) or any(_trains(loop, src, failure, sources) for loop in loops):
                return self.decline(
                    f"{got}, in a training step at {place(here)} that no DataLoader of the code feeds",
                    diagnosis=(f"Train with batches of more than one sample: the batch that reaches {norm} from "
                               f"{place(innermost)} holds one (a batch size over 1, or leave out a last partial "
                               "batch of one); model.eval() would stop the layer from training."),
                    at=innermost,
                )
            in_loop = in_loop or bool(loops)
            evaluates = evaluates or _evaluates(src, frame.line)
        if innermost is not None and (evaluates or not in_loop):
            return self.decline(
                f"{got}: one sample forwarded at {place(innermost)}, with no training step (backward, step) "
                "after it" + ("" if in_loop else " and no loop around it"),
                diagnosis=(f"For inference on one sample, call model.eval() before {place(innermost)} (BatchNorm "
                           "then uses its running statistics)."),
                at=innermost,
            )
        return self.decline(
            f"{got}; the batch of one does not come from a DataLoader loop the code shows",
            diagnosis=(f"{norm} ran in training mode on a batch of one sample"
                       + (f" at {place(innermost)}" if innermost else "") + "; the code shows neither a training "
                       "step nor an evaluation around that call, so no change is proposed."),
            at=innermost or failure.user_frame,
        )

    @classmethod
    def remedy(cls) -> str:
        return ("Avoid batches of one sample in training mode: drop_last=True on the training DataLoader when "
                "the last batch is the one, a batch size over 1, model.eval() for evaluation and single-sample "
                "inference, or GroupNorm/LayerNorm instead of BatchNorm.")


def _train_with_more(loader: Loader, built_at: Frame, given: str) -> str:
    """The remedy for a training loop whose loader makes a batch of one in a way the code does
    not show: batches of more than one sample, never ``model.eval()``, which would stop the
    layer from training."""
    return (f"The loop at {place(loader.loop_frame)} trains, so it needs batches of more than one sample: the "
            f"batch of one comes from {loader.name} (built at {place(built_at)}, with {given}); "
            "model.eval() would stop the layer from training.")


def _last_batch_plan(evidence: Evidence | None, built_at: Frame) -> LastBatch | None:
    """The harness's record of the real run's last batch for the DataLoader built at ``built_at``
    (its dataset size and own batch size), when the run made one."""
    plans = evidence.limits.last_batches if evidence else ()
    for plan in plans:
        site = plan.site
        if site is None:
            continue
        file, _, line = site.rpartition(":")
        if not line.isdigit() or int(line) != built_at.line:
            continue
        recorded, wanted = Path(file).as_posix(), Path(built_at.file).as_posix()
        if recorded == wanted or recorded.endswith("/" + wanted) or wanted.endswith("/" + recorded):
            return plan
    return None


def _loader(failure: Failure, evidence: Evidence | None, sources: Sources) -> Loader | None:
    """The DataLoader of the innermost ``for`` loop, in the user's frames outside ``forward``, whose
    recorded batch has one sample (a loader passed in as an argument is followed to its caller)."""
    frames = list(failure.frames)
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        if not frame.user or frame.function == "forward":
            continue
        tensors = local_tensors(evidence, frame)
        if tensors and not any((shape_of(t) or [0])[:1] == [1] for t in tensors.values()):
            continue
        src = source(sources, frame.file)
        if src is None:
            continue
        for loop in src.around(frame.line, cst.For):
            assert isinstance(loop, cst.For)
            name = _iterated(loop.iter)
            if name is None:
                continue
            call = _dataloader_binding(src, name, src.line(loop))
            if call is None:
                caller = next((f for f in reversed(frames[:index]) if f.user), None)
                followed = _from_caller(src, loop, name, caller, sources)
                if followed is not None:
                    call, src_of_call = followed
                    return Loader(name, call, src_of_call, loop, Frame(file=frame.file, line=src.line(loop), user=True),
                                  caller)
                continue
            return Loader(name, call, src, loop, Frame(file=frame.file, line=src.line(loop), user=True), frame)
    return None


def _batch_size_value(batch: cst.BaseExpression, evidence: Evidence | None, frame: Frame | None) -> int | None:
    """The loader's batch size: a literal, or a name whose value the run recorded in the frame
    that builds the loader (``batch_size = 1`` then ``DataLoader(..., batch_size=batch_size)``)."""
    if isinstance(batch, cst.Integer):
        return int(batch.value)
    if isinstance(batch, cst.Name):
        value = recorded_local(evidence, frame, batch.value)
        if value is not None and value.kind == "number" and isinstance(value.value, int):
            return value.value
    return None


def _from_caller(
    src: Source, loop: cst.For, name: str, caller: Frame | None, sources: Sources
) -> tuple[cst.Call, Source] | None:
    """The DataLoader call behind a parameter ``name`` of the loop's function, from the caller's line."""
    functions = src.around(src.line(loop), cst.FunctionDef)
    if not functions or caller is None:
        return None
    function = functions[0]
    assert isinstance(function, cst.FunctionDef)
    params = [p.name.value for p in function.params.params]
    if name not in params:
        return None
    position = params.index(name)
    caller_src = source(sources, caller.file)
    if caller_src is None:
        return None
    for node, span in caller_src.positions.items():
        if not isinstance(node, cst.Call) or not span.contains_line(caller.line):
            continue
        if called_name(node) != function.name.value:
            continue
        arg = keyword_arg(node, name)
        if arg is None:
            positional = [a for a in node.args if a.keyword is None and not a.star]
            offset = 1 if params and params[0] == "self" else 0
            arg = positional[position - offset] if 0 <= position - offset < len(positional) else None
        if arg is not None and isinstance(arg.value, cst.Name):
            call = _dataloader_binding(caller_src, arg.value.value, caller.line + 1)
            if call is not None:
                return call, caller_src
    return None


def _iterated(node: cst.BaseExpression) -> str | None:
    """``loader`` of ``for b in loader``, ``enumerate(loader)``, ``tqdm(loader, ...)``."""
    if isinstance(node, cst.Name):
        return node.value
    if (isinstance(node, cst.Call) and node.args and isinstance(node.args[0].value, cst.Name)
            and called_name(node) in ("enumerate", "tqdm", "iter")):
        return node.args[0].value.value
    return None


def _dataloader_binding(src: Source, name: str, before: int) -> cst.Call | None:
    """The ``DataLoader(...)`` call last bound to ``name`` before a line: in the function, else at module level."""
    imports = ImportTable(src.module)
    for statements in (src.statements_of(before), src.module.body):
        found = None
        for event in events(statements):
            if event.kind == "bind" and event.name == name and src.line(event.statement) < before:
                found = event
        if found is not None:
            value = found.value
            if isinstance(value, cst.Call) and (
                is_torch_name(imports.qualify(value.func), "torch.utils.data.DataLoader")
                or (isinstance(value.func, cst.Name) and value.func.value == "DataLoader")
            ):
                return value
            return None
    return None


def _calls_training(node: cst.CSTNode) -> bool:
    """Whether ``node``'s code calls ``.backward()`` or ``.step()``."""
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _TRAINING_CALLS
               for n in walk(node))


def _steps_after(src: Source, line: int) -> bool:
    """Whether the function (or module) around ``line`` calls ``.backward()`` or ``.step()`` after it:
    the forward at ``line`` is one of a training step."""
    functions = src.around(line, cst.FunctionDef)
    owner: cst.CSTNode = functions[0] if functions else src.module
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _TRAINING_CALLS
               and n in src.positions and src.line(n) > line for n in own_nodes(owner))


def _trains(loop: cst.For | cst.While, src: Source, failure: Failure, sources: Sources) -> bool:
    """Whether a loop trains: its body calls ``.backward()`` or ``.step()``, or a function of the
    file its body calls does (``train_step(x, y)``), or one of the traced user frames the loop's
    pass went through on the way to the failing forward does."""
    if _calls_training(loop.body):
        return True
    called = {called_name(n) for n in walk(loop.body) if isinstance(n, cst.Call)} - {""}
    if any(isinstance(n, cst.FunctionDef) and n.name.value in called and _calls_training(n.body)
           for n in walk(src.module)):
        return True
    span = src.positions[loop]
    frames = list(failure.frames)
    inside = [i for i, f in enumerate(frames) if f.user and Path(f.file) == src.path and span.contains_line(f.line)]
    for frame in frames[inside[-1] + 1:] if inside else ():
        inner = source(sources, frame.file) if frame.user else None
        functions = inner.around(frame.line, cst.FunctionDef) if inner else []
        if functions and _calls_training(functions[0]):
            return True
    return False


_EVALUATION_NAMES = re.compile(r"(?i)^_*(eval|valid|test|predict|infer|score|accuracy)")


def _evaluates(src: Source, line: int) -> bool:
    """Whether the code around ``line`` evaluates: autograd turned off there (``torch.no_grad()``,
    ``inference_mode``, a decorator) or a function named for evaluation (``evaluate``, ``test``)."""
    if grad_off_around(src, line) is not None:
        return True
    functions = src.around(line, cst.FunctionDef)
    return bool(functions) and isinstance(functions[0], cst.FunctionDef) and bool(
        _EVALUATION_NAMES.match(functions[0].name.value))


def _loop_role(loop: cst.For, src: Source, failure: Failure, sources: Sources) -> str | None:
    """``trains``, ``evaluates``, or None when the code shows neither."""
    if _trains(loop, src, failure, sources):
        return "trains"
    frames = [f for f in failure.frames if f.user and f.function != "forward"]
    if _evaluates(src, src.line(loop)) or any(
            _evaluates(inner, f.line) for f in frames if (inner := source(sources, f.file)) is not None
            and (inner.path != src.path or src.positions[loop].contains_line(f.line))):
        return "evaluates"
    return None
