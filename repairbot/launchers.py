"""Launchers: ``torchrun`` and ``accelerate launch``, the commands that start one process per rank.

``repairbot fix train.py --launcher "torchrun --nproc_per_node 2"`` runs the script as
``torchrun --nproc_per_node 2 train.py`` would, with the harness in every rank: the runner starts
the launcher's module under the user's interpreter (``PYTHON -m torch.distributed.run OPTIONS
bootstrap.py CONFIG``), so each rank loads the harness and then the script. ``--launcher`` holds
the launcher's own options only; SCRIPT (or ``-m MODULE``) and its arguments stay where they
are. The GitHub Action's ``command`` input splits a whole command line the same way
(``split_command``). Standard library only: the Action's scripts import it.
"""

from __future__ import annotations

import re
import shlex
import socket
from dataclasses import dataclass

# What each launcher is, as its first words are typed, and the module that runs it.
TORCHRUN = "torchrun"
ACCELERATE = "accelerate launch"
_MODULES = {TORCHRUN: "torch.distributed.run", ACCELERATE: "accelerate.commands.launch"}
_PYTHON = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?(?:\.exe)?$")
# Option names as both launchers accept them (``--nproc-per-node`` or ``--nproc_per_node``) are
# compared in their underscore form (``_name``).
# The options of each launcher that take no value (torch 2.x's torchrun, accelerate 1.x's launch;
# tests/test_launchers.py checks them against the installed parsers). Every other option takes
# one, as ``--opt VALUE`` or ``--opt=VALUE``.
_FLAGS = {
    TORCHRUN: frozenset({"--standalone", "--virtual_local_rank"}),
    ACCELERATE: frozenset({
        "--cpu", "--debug", "--downcast_bf16", "--dynamo_use_dynamic", "--dynamo_use_fullgraph",
        "--dynamo_use_regional_compilation", "--enable_cpu_affinity", "--fp8_use_autocast_during_eval",
        "--multi_gpu", "--no_tpu_cluster", "--quiet", "-q", "--same_network", "--tpu", "--tpu_cluster",
        "--tpu_use_sudo", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--use_parallelism_config",
    }),
}
# Options that make the launcher run something else than the harness, which runs SCRIPT (or
# `-m MODULE`) as given to repairbot in every rank; or nothing at all (its help).
_RUNS_SOMETHING_ELSE = {
    TORCHRUN: frozenset({"-m", "--module", "--no_python", "--run_path", "-h", "--help"}),
    ACCELERATE: frozenset({"-m", "--module", "--no_python", "-h", "--help"}),
}
# The options that set the rendezvous port; where none is given, repairbot chooses a free port
# (two runs at once, its own or the user's, must not meet on the launcher's default 29500).
_PORT_OPTIONS = {
    TORCHRUN: frozenset({"--master_port", "--rdzv_endpoint", "--standalone"}),
    ACCELERATE: frozenset({"--main_process_port"}),
}
_PORT_OPTION = {TORCHRUN: "--master_port", ACCELERATE: "--main_process_port"}
# The options that spread ranks over machines: repairbot runs every rank on this one.
_NODE_OPTIONS = {TORCHRUN: frozenset({"--nnodes"}), ACCELERATE: frozenset({"--num_machines"})}
_KNOWN = "`torchrun`, `python -m torch.distributed.run` or `accelerate launch`"


class LauncherError(ValueError):
    """A launcher that cannot be used; its message is the one line the user sees."""


@dataclass(frozen=True)
class Launcher:
    """A launcher and its own options, as the user typed them."""

    kind: str  # TORCHRUN or ACCELERATE
    options: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        """The launcher's module, run with ``python -m`` under the user's interpreter."""
        return _MODULES[self.kind]

    def text(self) -> str:
        """The launcher as the user would type it."""
        return shlex.join([*self.kind.split(), *self.options])

    def gives_port(self) -> bool:
        """Do the options set the rendezvous port (else repairbot chooses one)?"""
        return any(_name(option) in _PORT_OPTIONS[self.kind] for option in self.options)

    def port_options(self, port: int) -> tuple[str, ...]:
        """The option that sets the rendezvous port to ``port``."""
        return (_PORT_OPTION[self.kind], str(port))

    def command(self) -> tuple[list[str], tuple[str, ...]]:
        """``-m MODULE OPTIONS`` as the interpreter runs the launcher, and what was added to the
        options: a free rendezvous port where they set none (two runs at once, parallel tests or
        the user's own job, must not meet on the default port)."""
        added = () if self.gives_port() else self.port_options(free_port())
        return ["-m", self.module, *self.options, *added], added


def parse_launcher(text: str) -> Launcher:
    """The ``--launcher`` option: a launcher's first words, then its own options only."""
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise LauncherError(f"--launcher {text!r}: {error}") from None
    where = f"--launcher {text!r}"
    kind, options = _launcher_head(words)
    if kind is None:
        raise LauncherError(f"{where}: not a launcher repairbot knows ({_KNOWN})")
    rest = _take_options(kind, options, where)
    if rest:
        raise LauncherError(
            f"{where}: {rest[0]!r} is not an option of {kind}; --launcher holds the launcher's "
            f"options only, SCRIPT and its arguments go where they always do: repairbot fix SCRIPT "
            f"--launcher '{kind} ...' -- ARGS"
        )
    return Launcher(kind, tuple(options))


def split_command(words: list[str], where: str) -> tuple[Launcher, list[str]] | None:
    """A command line that starts with a launcher: (the launcher, the words after its options:
    SCRIPT or `-m MODULE` and the arguments); None when it does not start with one. ``where``
    begins each error's message."""
    kind, rest = _launcher_head(words)
    if kind is None:
        return None
    after = _take_options(kind, rest, where, module_allowed=True)
    return Launcher(kind, tuple(rest[: len(rest) - len(after)])), after


def free_port() -> int:
    """A TCP port nobody listens on now (the system's choice), for a rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _name(option: str) -> str:
    """An option's name in its underscore form: ``--nproc-per-node=2`` -> ``--nproc_per_node``."""
    name = option.split("=", 1)[0]
    return "--" + name[2:].replace("-", "_") if name.startswith("--") else name


def _launcher_head(words: list[str]) -> tuple[str | None, list[str]]:
    """Which launcher the words start with, and the words after its name."""
    if words[:1] == ["torchrun"]:
        return TORCHRUN, words[1:]
    if words[:2] == ["accelerate", "launch"]:
        return ACCELERATE, words[2:]
    if len(words) >= 3 and _PYTHON.match(words[0]) and words[1] == "-m":
        for kind, module in _MODULES.items():
            if words[2] == module:
                return kind, words[3:]
    return None, words


def _take_options(kind: str, words: list[str], where: str, module_allowed: bool = False) -> list[str]:
    """Check the launcher's options at the start of ``words``; return the words after them.

    ``-m`` ends them where ``module_allowed`` (a whole command: ``torchrun -m pkg.train``, which
    repairbot runs as its own ``-m``).
    """
    index = 0
    while index < len(words):
        word = words[index]
        if not word.startswith("-") or word == "--":
            break
        name, typed = _name(word), word.split("=", 1)[0]
        if name in ("-m", "--module") and module_allowed:
            break
        if name in _RUNS_SOMETHING_ELSE[kind]:
            raise LauncherError(
                f"{where}: {kind} {typed} would run something else than SCRIPT; repairbot runs SCRIPT "
                "(or -m MODULE) in every rank itself"
            )
        takes_value = name not in _FLAGS[kind] and "=" not in word
        if takes_value and index + 1 >= len(words):
            raise LauncherError(f"{where}: {kind} {typed} needs a value")
        value = words[index + 1] if takes_value else word.partition("=")[2]
        if name in _NODE_OPTIONS[kind] and value not in ("1", "1:1"):
            raise LauncherError(f"{where}: {typed} {value}: repairbot runs every rank on this machine (one node)")
        index += 2 if takes_value else 1
    return words[index:]
