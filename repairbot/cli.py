"""The command line: options in, one API call, rendered output, the contract's exit code.

click is imported here only. Exit codes: 0 success, 1 a failure remains (or nothing
matched), 2 bad input or usage, 130 interrupted by SIGINT, 143 by SIGTERM.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console, ConsoleRenderable
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from repairbot import __version__, api, registry
from repairbot.classify import ending_frame
from repairbot.launchers import ACCELERATE, Launcher, LauncherError, parse_launcher
from repairbot.lint import LintOptions
from repairbot.lint.formats import FORMATS, render, summary
from repairbot.output.markdown import render_markdown
from repairbot.output.report import render_json, render_text, status_line
from repairbot.output.sarif import render_sarif
from repairbot.results import RepairReport
from repairbot.run_config import BY_NAME, DOCTOR, FIX, pop_config
from repairbot.sources import write_atomic
from repairbot.trace.runner import RunRequest, RunResult, describe_run
from repairbot.types import BadInput

F = TypeVar("F", bound=Callable[..., Any])


class Terminated(Exception):
    """SIGTERM arrived: unwind (killing the child's process tree) and exit 143."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


def _use_color(flag: bool | None) -> bool:
    if flag is not None:
        return flag
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def common_options(command: F) -> F:
    """-v/-q/--color, shared by every command."""

    @click.option("-v", "--verbose", is_flag=True, help="Say more: each run, its outcome, the script's output tail.")
    @click.option("-q", "--quiet", is_flag=True, help="Print only the result.")
    @click.option("--color/--no-color", default=None, help="Colour the output (default: on a terminal, unless NO_COLOR is set).")
    @functools.wraps(command)
    def wrapper(*args: Any, verbose: bool, quiet: bool, color: bool | None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        ctx.color = _use_color(color)
        ctx.meta["verbose"], ctx.meta["quiet"], ctx.meta["color"] = verbose, quiet, color
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            return command(*args, **kwargs)
        except BadInput as error:
            click.echo(f"repairbot: error: {error}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo("repairbot: interrupted", err=True)
            ctx.exit(130)
        except Terminated:
            click.echo("repairbot: terminated", err=True)
            ctx.exit(143)
        finally:
            signal.signal(signal.SIGTERM, previous)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="repairbot")
def main() -> None:
    """Repairs crashing PyTorch training scripts with one minimal, verified fix."""


def _style_report(text: str) -> str:
    styled = []
    for line in text.splitlines(keepends=True):
        if line.startswith("[FIXED]") or line.startswith("Status: SUCCESS"):
            line = click.style(line, fg="green", bold=True)
        elif line.startswith(("[FAILED]", "Status: FAILED")):
            line = click.style(line, fg="red", bold=True)
        elif line.startswith(("[DIAGNOSED]", "[WARNING]")):
            line = click.style(line, fg="yellow", bold=True)
        styled.append(line)
    return "".join(styled)


def _style_diff(diff: str) -> str:
    styled = []
    for line in diff.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            line = click.style(line, bold=True)
        elif line.startswith("+"):
            line = click.style(line, fg="green")
        elif line.startswith("-"):
            line = click.style(line, fg="red")
        elif line.startswith("@@"):
            line = click.style(line, fg="cyan")
        styled.append(line)
    return "".join(styled)


def _write_report_file(path: str, content: str) -> None:
    if path == "-":
        click.echo(content, nl=False)
        return
    target = Path(path)
    try:
        if target.exists() and not target.is_file():
            # a device or a pipe (/dev/stdout, a process substitution): written as a stream
            with target.open("w", encoding="utf-8") as stream:
                stream.write(content)
        else:
            # whole or not at all: a reader (a CI step, a dashboard) never sees half a report
            write_atomic(target, content.encode("utf-8"))
    except OSError as error:
        raise BadInput(f"cannot write {path}: {error.strerror}") from None


class Progress:
    """The progress of a repair on stderr, one line per run.

    On an interactive terminal, a live status line (spinner, the run, its elapsed time and the
    repair's) that leaves each finished run behind as a line with its duration; elsewhere
    (a CI log, a pipe), each run's plain ``repairbot: run N: ...`` line as it starts.
    """

    def __init__(self, console: Console, live: bool) -> None:
        self.console = console
        self.live: Live | None = None
        self.message: str | None = None
        self.started = self.run_started = time.monotonic()
        if live:
            self.spinner = Spinner("dots", style="cyan")
            self.live = Live(self, console=console, transient=True, refresh_per_second=8)
            self.live.start()

    def __rich__(self) -> ConsoleRenderable:
        now = time.monotonic()
        text = Text.assemble(
            ("repairbot: ", "bold"), self.message or "starting",
            (f"  {now - self.run_started:.0f} s (total {now - self.started:.0f} s)", "dim"),
        )
        self.spinner.update(text=text)
        return self.spinner

    def _finish_run(self) -> None:
        if self.live is not None and self.message is not None:
            took = time.monotonic() - self.run_started
            self.live.console.print(Text.assemble(("repairbot: ", "bold"), self.message, (f" ({took:.1f} s)", "dim")))

    def __call__(self, message: str) -> None:
        self._finish_run()
        self.message, self.run_started = message, time.monotonic()
        if self.live is None:
            self.console.print(Text.assemble(("repairbot: ", "bold"), message))

    def close(self) -> None:
        if self.live is not None:
            self._finish_run()
            self.live.stop()
            self.live = None
        self.message = None


def _progress(color: bool | None, silent: bool) -> Progress | None:
    if silent:
        return None
    stream = sys.stderr
    terminal = stream.isatty()
    interactive = terminal and os.environ.get("TERM") != "dumb" and os.environ.get("TTY_INTERACTIVE") != "0"
    colored = color if color is not None else terminal and "NO_COLOR" not in os.environ
    console = Console(
        file=stream, force_terminal=colored or interactive, force_interactive=interactive,
        no_color=not colored, highlight=False, soft_wrap=True,
    )
    return Progress(console, live=interactive)


# Exits 3 where a module cannot be imported: find_spec looks, without the seconds an import costs.
_MODULE_PROBE = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)"


def _lacks(python: str, module: str) -> bool:
    try:
        probe = subprocess.run([python, "-c", _MODULE_PROBE, module], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False  # not runnable: the checks of the run say so, in their words
    return probe.returncode == 3


def check_torch(python: str, launcher: Launcher | None = None) -> None:
    """fix and doctor run the script under ``python``: refuse at once where it has no torch
    (repairbot itself does not need torch, so installing repairbot does not bring it), or not
    the launcher's package."""
    if _lacks(python, "torch"):
        raise BadInput(
            f"{python} has no torch: install torch there (https://pytorch.org/get-started/locally/) "
            "or name an interpreter that has it with --python"
        )
    if launcher is not None and launcher.kind == ACCELERATE and _lacks(python, "accelerate"):
        raise BadInput(f"--launcher {launcher.text()!r}: {python} has no accelerate (pip install accelerate there)")


def _launcher(options: dict[str, Any]) -> None:
    """--launcher's text, parsed in place (one line and exit 2 where it is not a launcher's)."""
    text = options["launcher"]
    try:
        options["launcher"] = parse_launcher(text) if text is not None else None
    except LauncherError as error:
        raise BadInput(str(error)) from None


class ScriptCommand(click.Command):
    """fix and doctor: an option repairbot does not know, after SCRIPT, is most likely the
    script's own, which goes after ``--``; the error says so."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # click consumes the list it parses
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            script = self._script_before(ctx, given, error.option_name)
            if script is None or error.possibilities:  # before SCRIPT, or a typo of ours
                raise
            raise click.NoSuchOption(
                error.option_name,
                message=(
                    f"No such option: {error.option_name} (repairbot's options: --help). Arguments for the "
                    f"script go after `--`: repairbot {ctx.info_name} {script} [OPTIONS] -- {error.option_name} ..."
                ),
                ctx=ctx,
            ) from None

    def _script_before(self, ctx: click.Context, args: list[str], unknown: str) -> str | None:
        """SCRIPT where it comes before the unknown option in ``args``, else None."""
        takes_value = {
            name for param in self.get_params(ctx) if isinstance(param, click.Option) and not param.is_flag
            for name in param.opts
        }
        index = 0
        while index < len(args):
            arg = args[index]
            if arg == "--" or arg.split("=", 1)[0] == unknown:
                return None
            if not arg.startswith("-") or arg == "-":
                return arg
            index += 2 if arg in takes_value else 1
        return None


def setting_option(name: str) -> Callable[[F], F]:
    """The option of one setting of the run configuration (repairbot/run_config.py)."""
    setting = BY_NAME[name]
    if setting.flag:
        return click.option(setting.option, setting.parameter, is_flag=True, help=setting.help)
    return click.option(setting.option, type=setting.type, default=setting.default, show_default=True, help=setting.help)


def run_options(command: F) -> F:
    """SCRIPT, its arguments and the options of a traced run, shared by fix and doctor."""
    decorators = (
        click.argument("script", type=click.Path(path_type=Path), required=False),
        click.argument("script_args", nargs=-1, type=click.UNPROCESSED),
        click.option("-m", "module", metavar="MODULE", help="Run a module as `python -m MODULE` would (then no SCRIPT)."),
        setting_option("batch_size"),
        setting_option("max_batches"),
        setting_option("max_steps"),
        setting_option("timeout"),
        click.option("--json", "json_path", metavar="PATH", help="Write the JSON report ('-' for stdout)."),
        click.option("--markdown", "markdown_path", metavar="PATH", help="Write the Markdown report (e.g. $GITHUB_STEP_SUMMARY; '-' for stdout)."),
        click.option("--sarif", "sarif_path", metavar="PATH", help="Write the failures, fixes and health findings as SARIF 2.1.0 ('-' for stdout)."),
        click.option("--python", "python", metavar="PATH", default=sys.executable, help="Interpreter for the script."),
        click.option(
            "--launcher", metavar="'LAUNCHER OPTIONS'",
            help="Run every run under a launcher, the script in each rank: 'torchrun --nproc_per_node 2' or "
            "'accelerate launch --num_processes 2' (the launcher's own options only; SCRIPT and its "
            "arguments as always). Without a rendezvous port, a free one is chosen.",
        ),
        click.option("--keep-scratch", is_flag=True, help="Keep the runs' scratch folder (outputs, shadowed files) and name it in the report."),
    )
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def _target(
    script: Path | None, script_args: tuple[str, ...], module: str | None
) -> tuple[Path, tuple[str, ...]]:
    """SCRIPT and its arguments; with -m MODULE every positional argument is the module's."""
    if module is not None:
        return Path(module), ((str(script),) if script is not None else ()) + tuple(script_args)
    if script is None:
        raise BadInput("give a SCRIPT to run, or -m MODULE")
    return script, tuple(script_args)


def _run_details(progress: Progress | None) -> Callable[[RunRequest, RunResult], None] | None:
    """-v: after each run, its command, limits, duration, outcome and the tail of its output."""
    if not click.get_current_context().meta["verbose"]:
        return None

    def show(request: RunRequest, result: RunResult) -> None:
        text = describe_run(request, result)
        if progress is not None and progress.live is not None:
            progress.live.console.print(Text(text))
        else:
            click.echo(text, err=True)

    return show


def _traced_command(
    script: Path, paths: dict[str, str | None], start: Callable[[Progress | None], RepairReport], show_diff: bool
) -> None:
    """What fix and doctor share around their api call: progress on stderr, the reports (an
    error report for a refusal too), the text report and the exit code."""
    ctx = click.get_current_context()
    quiet, verbose = ctx.meta["quiet"], ctx.meta["verbose"]
    to_stderr = "-" in paths.values()
    if list(paths.values()).count("-") > 1:  # a usage error: no report can be written
        raise BadInput("only one of --json, --markdown and --sarif can be '-' (stdout)")
    progress = _progress(ctx.meta["color"], silent=quiet and not verbose)
    try:
        report = start(progress)
    except BadInput as error:
        _write_reports(paths, api.error_report(str(script), str(error)), first_error_wins=True)
        raise
    finally:
        if progress is not None:
            progress.close()
    _show(report, quiet=quiet, to_stderr=to_stderr, show_diff=show_diff and not quiet)
    _write_reports(paths, report)
    ctx.exit(report.exit_code)


@main.command(cls=ScriptCommand, context_settings={"ignore_unknown_options": False})
@run_options
@click.option("--dry-run", is_flag=True, help="Change nothing in the repository; print the diff and the report.")
@setting_option("max_attempts")
@click.option("--branch", metavar="NAME", help="Branch for the fix commit (default: repairbot/fix-<stem>-<sha8>).")
@click.option("--no-branch", is_flag=True, help="Write the fix into the working tree instead of a new branch.")
@click.option("--safe-only", is_flag=True, help="Apply only fixes whose applicability is safe.")
@click.option("--pattern", "include", multiple=True, metavar="ID", help="Only try these patterns (repeatable).")
@click.option("--exclude", multiple=True, metavar="ID", help="Never try these patterns (repeatable).")
@setting_option("health")
@click.option("--strict-health", is_flag=True, help="Exit 1 when a health check finds something.")
@common_options
def fix(
    script: Path | None, script_args: tuple[str, ...], json_path: str | None, markdown_path: str | None,
    sarif_path: str | None, **options: Any,
) -> None:
    """Run SCRIPT under the tracing harness and repair the crash it hits.

    Arguments for the script go after `--`: repairbot fix train.py -- --epochs 1

    \b
    Under a launcher, its own options in --launcher, every rank traced:
    repairbot fix train.py --launcher 'torchrun --nproc_per_node 2' -- --epochs 1
    """

    def start(progress: Progress | None) -> RepairReport:
        if options["dry_run"] and options["no_branch"]:
            raise BadInput("--dry-run and --no-branch exclude each other")
        if options["branch"] and (options["dry_run"] or options["no_branch"]):
            raise BadInput("--branch needs branch mode (no --dry-run, no --no-branch)")
        config = pop_config(options, FIX)
        if not config.health and options["strict_health"]:
            raise BadInput("--no-health and --strict-health exclude each other")
        _launcher(options)
        check_torch(options["python"], options["launcher"])
        target, args = _target(script, script_args, options["module"])
        return api.repair(
            api.FixOptions(script=target, args=args, config=config, **options),
            progress=progress, on_run=_run_details(progress),
        )

    paths = {"json": json_path, "markdown": markdown_path, "sarif": sarif_path}
    _traced_command(script or Path(options["module"] or "-"), paths, start, show_diff=True)


def _write_reports(
    paths: dict[str, str | None], report: RepairReport, first_error_wins: bool = False
) -> None:
    """Every report asked for; with ``first_error_wins`` (the run was refused already), a report
    that cannot be written does not hide the reason of the refusal."""
    # a refused run has no repository root: its paths are the working directory's
    root = Path(report.root) if report.root else Path.cwd().resolve()
    renderers: dict[str, Callable[[], str]] = {
        "json": lambda: render_json(report),
        "markdown": lambda: render_markdown(report, root),
        "sarif": lambda: render_sarif(report, registry.all_patterns(), root),
    }
    for kind, path in paths.items():
        if not path:
            continue
        try:
            _write_report_file(path, renderers[kind]())
        except BadInput:
            if not first_error_wins:
                raise


def _show(report: RepairReport, quiet: bool, to_stderr: bool, show_diff: bool) -> None:
    if report.diff and show_diff:
        click.echo(_style_diff(report.diff), err=to_stderr, nl=False)
        click.echo("", err=to_stderr)
    text = status_line(report) + "\n" if quiet else render_text(report)
    click.echo(_style_report(text), err=to_stderr, nl=False)


@main.command(cls=ScriptCommand, context_settings={"ignore_unknown_options": False})
@run_options
@common_options
def doctor(
    script: Path | None, script_args: tuple[str, ...], json_path: str | None, markdown_path: str | None,
    sarif_path: str | None, **options: Any,
) -> None:
    """Run SCRIPT once under the harness with the health checks; repair nothing.

    Exit 0: no crash and no finding; 1: a finding or a crash. Arguments for the script go
    after `--`: repairbot doctor train.py -- --epochs 1 (under a launcher: --launcher
    'torchrun --nproc_per_node 2')
    """

    def start(progress: Progress | None) -> RepairReport:
        config = pop_config(options, DOCTOR)
        _launcher(options)
        check_torch(options["python"], options["launcher"])
        target, args = _target(script, script_args, options["module"])
        return api.doctor(
            api.DoctorOptions(script=target, args=args, config=config, **options),
            progress=progress, on_run=_run_details(progress),
        )

    paths = {"json": json_path, "markdown": markdown_path, "sarif": sarif_path}
    _traced_command(script or Path(options["module"] or "-"), paths, start, show_diff=False)


@main.command()
@click.argument("log", required=False, default="-", metavar="[LOG | -]")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@common_options
def classify(log: str, as_json: bool) -> None:
    """Classify the failure in a traceback or a whole CI log (file, or - for stdin)."""
    ctx = click.get_current_context()
    if log == "-":
        if sys.stdin.isatty():  # not a pipe: say what it waits for
            click.echo(
                "repairbot: reading the log from stdin (paste it, then Ctrl-D; or name a file: repairbot classify LOG)",
                err=True,
            )
        text = sys.stdin.read()
    else:
        path = Path(log)
        if not path.is_file():
            raise BadInput(f"{log}: no such file" if not path.exists() else f"{log}: not a file")
        try:
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError as error:
            raise BadInput(f"{log}: cannot read: {error.strerror}") from None
    result = api.classify(text)
    failure = result.failure
    frame = failure.user_frame if failure else None
    best = result.candidates[0].pattern if result.candidates else None
    data = {
        "pattern": result.pattern,
        "exc_type": failure.exc_type if failure else None,
        "message": failure.message if failure else None,
        "file": frame.file if frame else None,
        "line": frame.line if frame else None,
        "command": failure.command if failure else None,
        "fixable": best.FIXES if best else None,
        "remedy": best.remedy() if best else None,
    }
    if as_json:
        click.echo(json.dumps(data))
    elif failure is None:
        click.echo("no traceback found")
    else:
        click.echo(f"pattern: {data['pattern'] or 'none'}")
        ending = ending_frame(failure)
        click.echo(f"error: {failure.headline}" if ending is None else f"error: none printed (the traceback ends in {ending})")
        click.echo(f"user frame: {frame.location if frame else 'none'}")
        if failure.command:
            click.echo(f"command: {failure.command}")
        if best is not None:
            how = f"`repairbot fix` rewrites it ({best.APPLICABILITY.value})" if best.FIXES else "diagnosed, never edited"
            click.echo(f"remedy: {best.remedy()} [{how}]")
    ctx.exit(0 if result.pattern else 1)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
@common_options
def patterns(as_json: bool) -> None:
    """List the pattern catalogue: id, applicability, title, what it fixes."""
    catalogue = [
        {
            "id": p.ID,
            "title": p.TITLE,
            "applicability": p.APPLICABILITY.value,
            "fixes": p.FIXES,
            "tags": sorted(p.TAGS),
            "what_it_fixes": " ".join(p.documentation().get("What it fixes", "").split()),
        }
        for p in registry.all_patterns()
    ]
    if as_json:
        click.echo(json.dumps(catalogue, indent=2))
        return
    width = max(len(p.ID) for p in registry.all_patterns())
    for item in catalogue:
        click.echo(f"{item['id']:<{width}}  {item['applicability']:<13}  {item['title']}")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="PATH...")
@click.option("--fix", is_flag=True, help="Apply the safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff: the unsafe fixes too.")
@click.option("--diff", is_flag=True, help="Print the diff --fix would apply; write nothing.")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text", show_default=True, help="How to print the findings.")
@click.option("--select", multiple=True, metavar="ID", help="Only these rules (repeatable).")
@click.option("--ignore", multiple=True, metavar="ID", help="Never these rules (repeatable).")
@click.option("-j", "--jobs", type=int, metavar="N", help="Worker processes (default: every core).")
@click.option("--force-exclude", is_flag=True, help="Apply the exclusions (exclude, .gitignore) to the paths named too, as pre-commit needs.")
@common_options
def lint(paths: tuple[Path, ...], output_format: str, **options: Any) -> None:
    """Find the PyTorch bugs that never crash, in files and folders (fixed with --fix)."""
    ctx = click.get_current_context()
    if options["diff"] and output_format != "text":
        raise BadInput(f"--diff prints a diff; it does not combine with --format {output_format}")
    report = api.lint(LintOptions(paths=paths, edits=output_format == "sarif", **options))
    click.echo(report.diff if options["diff"] else render(report, output_format, Path.cwd(), bool(ctx.color)), nl=False)
    if not ctx.meta["quiet"] or report.errors or report.unchecked:
        to_stderr = options["diff"] or output_format != "text"
        click.echo(summary(report, verbose=ctx.meta["verbose"]), err=to_stderr, nl=False)
    ctx.exit(report.exit_code)


@main.command()
@click.option("--stdio", is_flag=True, default=True, help="Speak LSP over stdin and stdout (the only transport).")
@common_options
def server(stdio: bool) -> None:
    """Language server: the lint findings as diagnostics and their fixes as code actions."""
    from repairbot.server import serve

    serve()
