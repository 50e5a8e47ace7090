"""How long ``repairbot server`` takes from a change to its diagnostics, on a 2,000-line file.

A generated training module (models, a data pipeline, a training and an evaluation loop,
repeated with different names until it is 2,000 lines, with findings of several rules spread
through it) is opened in the server by a real LSP client (pytest-lsp) over stdio; then N
edits each change one line, and the time from sending ``didChange`` to receiving the
``publishDiagnostics`` of that version is measured. The server is started with
``debounceMs: 0``, so the figures exclude the debounce wait (150 ms by default), which an
editor adds on top. Run from the repository root:

    OMP_NUM_THREADS=1 .venv/bin/python bench/server_latency.py            # 30 changes
    OMP_NUM_THREADS=1 .venv/bin/python bench/server_latency.py --changes 100

It prints the file's size, the findings, the median and p95 latency in milliseconds.

2026-12-06, this project's 2-core machine shared with other jobs (load average 1.5-2.8), the
default 30 changes, eleven runs: median 123-260 ms (the median of the eleven medians 154 ms;
ten of them at most 200 ms), p95 168-301 ms, the server linting each change incrementally
(``repairbot.lint.incremental``: the edited top-level statement parsed again and spliced in,
per-statement rules re-run on it alone, positions shifted; the module-wide rules, about 0.12 s
of CPU here, still run on the whole file). The same command on the commit before (each change
linted whole by ``lint_bytes``), minutes apart on the same machine: median 470-927 ms, p95
584-1,403 ms (three runs, load average 1.6-3.9).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pytest_lsp import client_capabilities
from pytest_lsp.client import make_test_lsp_client

LINES = 2000
BLOCK = '''

class Encoder{n}(nn.Module):
    """A small convolutional encoder ({n})."""

    def __init__(self, channels: int = 3, width: int = 32) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, width, kernel_size=3, padding=1)
        self.norm = nn.BatchNorm2d(width)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        x = F.relu(self.norm(self.conv(x)))
        x = x.mean(dim=(2, 3))
        return self.head(x)


def make_loader{n}(size: int = 64, batch_size: int = 8):
    images = torch.randn(size, 3, 8, 8)
    labels = torch.randint(0, 10, (size,))
    return DataLoader(TensorDataset(images, labels), batch_size=batch_size, shuffle=True)


def train{n}(epochs: int = 1):
    model = Encoder{n}().to("cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0
    for epoch in range(epochs):
        for images, labels in make_loader{n}():
            logits = model.forward(images)
            loss = F.cross_entropy(F.softmax(logits, dim=1), labels)
            loss.backward()
            optimizer.step()
            total += loss
    state = torch.load("checkpoint{n}.pt")
    return total, state


def evaluate{n}(model, loader):
    model.eval()
    correct = 0
    for images, labels in loader:
        correct += (model(images).argmax(dim=1) == labels).sum().item()
    scale = torch.exp(torch.tensor(0.5)) - 1
    return correct * scale
'''
HEADER = (
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
    "from torch.utils.data import DataLoader, TensorDataset\n"
)


def generated_module(lines: int = LINES) -> str:
    text, n = HEADER, 0
    while text.count("\n") < lines:
        text += BLOCK.format(n=n)
        n += 1
    return "\n".join(text.split("\n")[:lines]) + "\n"


async def measure(changes: int, lines_count: int) -> tuple[int, list[float]]:
    root = Path(__file__).resolve().parent.parent
    client = make_test_lsp_client()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    await client.start_io(sys.executable, "-m", "repairbot", "server", env=env)
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), initialization_options={"debounceMs": 0},
    ))
    text = generated_module(lines_count)
    with tempfile.TemporaryDirectory() as folder:
        uri = (Path(folder) / "train.py").as_uri()

        async def published(version: int) -> None:
            """Wait for this version's diagnostics (the client's wait must start before they come)."""
            while True:
                params = await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
                if params.uri == uri and params.version == version:
                    return

        waiting = asyncio.ensure_future(asyncio.wait_for(published(1), 600))
        await asyncio.sleep(0)
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text),
        ))
        await waiting
        found = len(client.diagnostics[uri])
        latencies = []
        lines = text.split("\n")
        for version in range(2, changes + 2):
            lines[10] = f"        self.conv = nn.Conv2d(channels, width, kernel_size={version % 5 + 1}, padding=1)"
            waiting = asyncio.ensure_future(asyncio.wait_for(published(version), 600))
            await asyncio.sleep(0)
            started = time.perf_counter()
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(line=10, character=0), end=types.Position(line=11, character=0)),
                    text=lines[10] + "\n",
                )],
            ))
            await waiting
            latencies.append((time.perf_counter() - started) * 1000)
    await client.shutdown_session()
    await client.stop()
    return found, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--lines", type=int, default=LINES, help="the generated file's length")
    args = parser.parse_args()
    found, latencies = asyncio.run(measure(args.changes, args.lines))
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(f"{args.lines} lines, {found} findings, {len(latencies)} changes (debounce excluded)")
    print(f"didChange -> publishDiagnostics: median {statistics.median(latencies):.0f} ms, p95 {p95:.0f} ms")


if __name__ == "__main__":
    main()
