"""The run configuration: every limit of a traced run and of a repair, declared once.

Each field of ``RunConfig`` is one setting: its type (the annotation), its default, the help
text, the command-line option (the Action's input has the same name without the dashes), the
commands that take it and whether the harness gets it with every run. The CLI builds its
options from these fields, the API's options and the runner's limits take their defaults from
them, the report states them, and tests/test_action.py checks action.yml's inputs against them.
Standard library only: the Action's scripts import it too.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FIX = "fix"
DOCTOR = "doctor"


def _setting(
    default: int | float | bool, option: str, help: str, commands: tuple[str, ...] = (FIX, DOCTOR),
    harness: bool = False,
) -> Any:
    """A field of RunConfig with what its option says about it (a bool default True is switched
    off by its option, a flag: ``--no-health``)."""
    return field(default=default, metadata={"option": option, "help": help, "commands": commands, "harness": harness})


@dataclass(frozen=True)
class RunConfig:
    """The limits of a traced run and of a repair (``repairbot fix`` and ``doctor``)."""

    batch_size: int = _setting(2, "--batch-size", "Batch size forced on every DataLoader during runs.", harness=True)
    max_batches: int = _setting(2, "--max-batches", "Batches per pass over a DataLoader.", harness=True)
    max_steps: int = _setting(
        20, "--max-steps", "Optimizer steps outside DataLoader loops before a hand-written loop is left.", harness=True,
    )
    timeout: float = _setting(300.0, "--timeout", "Wall-clock limit of one run, in seconds.")
    max_attempts: int = _setting(3, "--max-attempts", "Repair attempts before giving up.", commands=(FIX,))
    health: bool = _setting(
        True, "--no-health", "Turn off the run-time health checks (NaN loss, gradients never reset, ...).",
        commands=(FIX,), harness=True,
    )


@dataclass(frozen=True)
class Setting:
    """One field of RunConfig as the CLI, the Action and the harness see it."""

    name: str  # RunConfig's field
    type: type
    default: int | float | bool
    help: str
    option: str  # the command-line option
    commands: tuple[str, ...]
    harness: bool  # sent to the harness with every run (the runner's Limits)

    @property
    def flag(self) -> bool:
        """A setting on by default that its option (``--no-...``) switches off."""
        return self.type is bool

    @property
    def parameter(self) -> str:
        """The option's value as click names it: ``--no-health`` -> ``no_health``."""
        return self.option.lstrip("-").replace("-", "_")

    @property
    def input(self) -> str:
        """The Action's input that sets it."""
        return self.option.lstrip("-")

    @property
    def input_default(self) -> str:
        """The input's default as action.yml writes it ("2", "300", "false")."""
        if self.flag:
            return "false"  # the option is not given
        return f"{self.default:g}"

    @property
    def input_help(self) -> str:
        """The input's description in action.yml (a flag's input is `true` or `false`)."""
        return f"`true`: {self.help}" if self.flag else self.help

    def from_option(self, value: Any) -> Any:
        """The setting's value from its option's (a flag given switches the setting off)."""
        return not value if self.flag else value


def _settings() -> tuple[Setting, ...]:
    types = typing.get_type_hints(RunConfig)
    return tuple(
        Setting(
            name=f.name, type=types[f.name], default=getattr(DEFAULTS, f.name), help=f.metadata["help"],
            option=f.metadata["option"],
            commands=f.metadata["commands"], harness=f.metadata["harness"],
        )
        for f in dataclasses.fields(RunConfig)
    )


DEFAULTS = RunConfig()
SETTINGS: tuple[Setting, ...] = _settings()
BY_NAME: Mapping[str, Setting] = {s.name: s for s in SETTINGS}


def pop_config(values: dict[str, Any], command: str) -> RunConfig:
    """The RunConfig of a command's parsed options, taken out of ``values`` (click's
    parameters); a setting the command has no option for keeps its default."""
    given = {s.name: s.from_option(values.pop(s.parameter)) for s in SETTINGS if command in s.commands}
    return RunConfig(**given)
