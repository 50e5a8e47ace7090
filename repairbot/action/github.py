"""The runner's file and workflow-command protocols, as both stages use them (standard library only).

Values that come from a run (messages, paths) are never trusted: outputs use a random heredoc
delimiter, annotation data is escaped, and output the script prints is fenced with
``::stop-commands::`` so that it cannot issue workflow commands.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


def _append(variable: str, text: str) -> None:
    """Append to the file the runner names in ``variable`` (nothing when it is not set: a local run)."""
    path = os.environ.get(variable)
    if not path:
        return
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write(text)


def set_outputs(values: Mapping[str, str]) -> None:
    """Step outputs through ``$GITHUB_OUTPUT``, each in the heredoc form with a random delimiter."""
    lines = []
    for name, value in values.items():
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        if delimiter in value:  # cannot happen by chance; refuse rather than be cut short
            raise ValueError(f"output {name}: the value holds its delimiter")
        lines.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    _append("GITHUB_OUTPUT", "".join(lines))


def append_summary(markdown: str) -> None:
    """Add to the step's job summary (``$GITHUB_STEP_SUMMARY``)."""
    _append("GITHUB_STEP_SUMMARY", markdown if markdown.endswith("\n") else markdown + "\n")


def escape_data(text: str) -> str:
    """A workflow command's message (after ``::``): ``%``, CR and LF percent-encoded, so that a
    value cannot end the command or start another."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``file=``, ``title=``): ``escape_data`` and also
    ``:`` and ``,``, which end a property."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: str, message: str, file: str | None = None, line: int | None = None, title: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """An ``::error``/``::warning``/``::notice`` annotation on a file and line of the repository."""
    properties = []
    if file:
        properties.append(f"file={escape_property(file)}")
        if line:
            properties.append(f"line={int(line)}")
    if title:
        properties.append(f"title={escape_property(title)}")
    head = f"::{level} {','.join(properties)}" if properties else f"::{level}"
    print(f"{head}::{escape_data(message)}", file=stream or sys.stdout, flush=True)


@contextmanager
def group(title: str, stream: TextIO | None = None) -> Iterator[None]:
    """A collapsed group in the log whose contents cannot issue workflow commands."""
    out = stream or sys.stdout
    token = secrets.token_hex(16)
    print(f"::group::{escape_data(title)}", file=out, flush=True)
    print(f"::stop-commands::{token}", file=out, flush=True)
    try:
        yield
    finally:
        print(f"::{token}::", file=out, flush=True)
        print("::endgroup::", file=out, flush=True)
