"""nonpublic-torch-api: imports and uses of torch's private modules and names."""

from __future__ import annotations

import re

import libcst as cst

from repairbot.analysis import dotted_name, reference_head, torch_reference, whole_reference
from repairbot.lint.rule import Invalid, LintRule, Scope, Severity, Valid
from repairbot.types import Applicability

_PACKAGES = ("torch", "torchvision", "torchaudio", "torchtext")
# private names with a public twin: (the public name, the applicability of the swap)
PUBLIC: dict[str, tuple[str, Applicability]] = {
    # the same function objects, re-exported
    "torch.utils.data._utils.collate.default_collate": ("torch.utils.data.default_collate", Applicability.SAFE),
    "torch.utils.data._utils.collate.default_convert": ("torch.utils.data.default_convert", Applicability.SAFE),
    # a subclass kept for compatibility: isinstance checks against it answer differently
    "torch.optim.lr_scheduler._LRScheduler": ("torch.optim.lr_scheduler.LRScheduler", Applicability.UNSAFE),
}


# a private component after a dot, or a private name in an import (after `import`, a comma or
# the `(` of a parenthesised import, on the same line or the next ones)
_MAY_USE = re.compile(rb"\._|(?:\bimport|,|\()\s*(?:\\\s*)?_")


def _private(parts: list[str]) -> str | None:
    """The first private component of a dotted name (``_utils``; not ``__version__``)."""
    return next((p for p in parts if p.startswith("_") and not (p.startswith("__") and p.endswith("__"))), None)


class NonpublicTorchApi(LintRule):
    """Finds imports and uses of torch's non-public modules and names (``torch._C``, ``_utils``...).

    What it finds:
        ``import``/``from ... import`` statements of a ``torch`` (or ``torchvision``,
        ``torchaudio``, ``torchtext``) module or name with a private component (a leading
        underscore, dunders aside), and attribute chains that reach one from a public name
        (``torch.utils.data._utils.collate.default_collate``), and the uses of a private name
        with a public twin that the file imports (``default_collate(batch)`` after ``from
        torch.utils.data._utils.collate import default_collate``). Code of the package itself is
        not checked: a package uses its own internals.

    Why it matters:
        Private modules move and change between releases without deprecation:
        ``from torch._six import inf`` broke every project that used it when ``torch._six``
        went away in 2.0, and ``torch.utils.data._utils`` has been reorganised more than once.
        A public equivalent usually exists.

    Fix safety:
        Where the public twin is the same object (``torch.utils.data.default_collate``), the
        fix rewrites the import or the reference: safe. ``_LRScheduler`` becomes
        ``LRScheduler`` as an unsafe fix (an ``isinstance`` check against it then matches the
        built-in schedulers too). Other private names are reported only.

    Not handled:
        Private attributes of objects (``model._modules``); ``torch._dynamo`` and
        ``torch._inductor`` settings that have no public form yet are reported like the rest.

    Differs from TorchFix:
        The public name written is ``torch.utils.data.default_collate`` (the documented one)
        where TorchFix writes ``torch.utils.data.dataloader.default_collate``: the same
        function object. No import is added: a use reached through an imported private module
        (``_utils.collate.default_collate(b)`` after ``from torch.utils.data import _utils``) is
        reported without a fix unless ``torch`` (or ``torch.utils.data``) is imported before it,
        because adding imports is an edit outside the finding that ``# repairbot: ignore`` on
        that line could not undo. The private module import itself is reported too.
    """

    ID = "nonpublic-torch-api"
    SEVERITY = Severity.INFORMATION
    TITLE = "An import or use of a private torch module or name"
    SCOPE = Scope.STATEMENT  # each finding reads its own statement and the imports alone
    MESSAGE = "this is a private torch API: it can change or go away without notice"
    APPLICABILITY = Applicability.SAFE

    VALID = (
        Valid("""
            import torch
            from torch.utils.data import default_collate
            print(torch.__version__)
            model._modules.clear()
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            from torch.utils.data._utils.collate import default_collate
            """,
            line=2, column=6, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            from torch.utils.data import default_collate
            """,
        ),
        Invalid(
            """
            import torch
            batch = torch.utils.data._utils.collate.default_collate(items)
            """,
            line=2, column=9, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            batch = torch.utils.data.default_collate(items)
            """,
        ),
        Invalid(
            """
            from torch.optim.lr_scheduler import _LRScheduler
            class Warmup(_LRScheduler):
                pass
            """,
            line=1, column=38, fix=Applicability.UNSAFE,
            expected_fix="""
            from torch.optim.lr_scheduler import LRScheduler as _LRScheduler
            class Warmup(_LRScheduler):
                pass
            """,
        ),
        Invalid(
            """
            import torch
            tracing = torch._C._get_tracing_state()
            """,
            line=2, column=11,
        ),
        Invalid(
            """
            import torch._dynamo as dynamo
            """,
            line=1, column=8,
        ),
        # a parenthesised import over several lines
        Invalid(
            """
            from torch.utils.data import (
                _utils,
            )
            """,
            line=2, column=5,
        ),
        # the use of an imported private name with a public twin (the import has the fix)
        Invalid(
            """
            from torch.utils.data._utils.collate import default_collate  # repairbot: ignore
            def collate(batch):
                return default_collate(batch)
            """,
            line=3, column=12, message="torch.utils.data.default_collate",
        ),
    )

    @classmethod
    def applies(cls, data: bytes, package: str | None) -> bool:
        return package not in _PACKAGES and _MAY_USE.search(data) is not None

    def _message(self, name: str, public: str | None) -> str:
        instead = f": use `{public}`" if public else ""
        return f"`{name}` is not a public torch API: it can change or go away in any release{instead}"

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module) or ""
        if module.split(".")[0] not in _PACKAGES or module.split(".")[0] == self.context.package:
            return
        if _private(module.split(".")):
            public = self._public_module(node, module)
            self.report(
                node.module, self._message(module, public[0] if public else None),
                replacement=public[1] if public else None, target=node,
                applicability=Applicability.SAFE if public else None,
            )
            return
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            if not _private([name]):
                continue
            qualified = f"{module}.{name}"
            twin = PUBLIC.get(qualified)
            replacement = None
            if twin and twin[0].rsplit(".", 1)[0] == module:
                new_name = twin[0].rsplit(".", 1)[1]
                replacement = alias.with_changes(
                    name=cst.Name(new_name),
                    asname=alias.asname or cst.AsName(name=cst.Name(name)),
                )
            self.report(
                alias.name, self._message(qualified, twin[0] if twin else None),
                replacement=replacement, target=alias, applicability=twin[1] if twin and replacement else None,
            )

    def _public_module(self, node: cst.ImportFrom, module: str) -> tuple[str, cst.ImportFrom] | None:
        """``from <private module> import a, b`` where a and b have public twins in one module."""
        if isinstance(node.names, cst.ImportStar):
            return None
        twins = [PUBLIC.get(f"{module}.{dotted_name(alias.name)}") for alias in node.names]
        if not all(t is not None and t[1] is Applicability.SAFE for t in twins):
            return None
        homes = {t[0].rsplit(".", 1)[0] for t in twins if t is not None}
        names_kept = all(
            t is not None and t[0].rsplit(".", 1)[1] == dotted_name(a.name) for t, a in zip(twins, node.names, strict=True)
        )
        if len(homes) != 1 or not names_kept:
            return None
        home = homes.pop()
        return home, node.with_changes(module=cst.parse_expression(home))

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            parts = name.split(".")
            if parts[0] in _PACKAGES and parts[0] != self.context.package and _private(parts):
                self.report(alias.name, self._message(name, None))

    def visit_Name(self, node: cst.Name) -> None:
        # a use of a name imported from a private module that has a public twin
        # (`default_collate(batch)` after `from torch.utils.data._utils.collate import
        # default_collate`): the import's finding carries the fix, the use is reported with it
        qualified = self.context.imports.aliases.get(node.value)
        if qualified not in PUBLIC or PUBLIC[qualified][1] is not Applicability.SAFE or qualified.split(".")[0] == self.context.package or not whole_reference(self.context):
            return
        assert qualified is not None
        self.report(node, self._message(qualified, PUBLIC[qualified][0]))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if reference_head(node) not in self.context.imports.aliases:
            return
        qualified = self.context.qualify(node)
        if qualified is None or qualified.split(".")[0] not in _PACKAGES or not whole_reference(self.context):
            return
        if qualified.split(".")[0] == self.context.package:
            return
        written = (dotted_name(node) or "").split(".")[1:]  # what the chain spells out after its root
        twin = PUBLIC.get(qualified)
        if not _private(written) and twin is None:
            return  # reached through a private name the file imports: its import is reported
        replacement = torch_reference(self.context, twin[0], node) if twin else None
        self.report(
            node, self._message(qualified, twin[0] if twin else None),
            replacement=replacement, applicability=twin[1] if twin and replacement else None,
        )
