"""The harness never materialises what the script iterates lazily (issue 28, item 1).

Endless loaders (``RandomSampler(ds, replacement=True, num_samples=int(1e10))`` behind a kept
iterator, as makemore's ``InfiniteDataLoader`` and minGPT's ``Trainer`` build them), a 1e12-sample
sampler, an endless ``IterableDataset``, a generator and ``itertools.cycle(loader)``: each script
runs through the real command line to its real outcome (a working one: already passing; one
with a wrong ``nn.Linear`` size: fixed) within a memory bound on every process the run starts.
The harness that built the pass's index list (``list(sampler)``) raised MemoryError at the
user's ``next(...)`` under the address-space limit below, or passed the RSS bound.

Then the last-partial-batch plan: its size is ``len(sampler) % batch_size`` of the pass's own
sampler (not of the dataset), its indices the true tail of a sequential order, and a pass with
no length or an endless one plans none.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repairbot.trace.runner import RunRequest, SubprocessRunner
from repairbot.types import RunStatus
from tests.support import ROOT, commit_all, cuda_available, init_repo

pytestmark = pytest.mark.torch

# Peak RSS of any process of one `repairbot fix` run, in kB: the harness child with torch is
# about 300 MB here; a pass's index list of 1e10 samples passes this long before it ends.
RSS_BOUND_KB = 900_000
# The address space each process may map: a regression that lists an endless sampler gets a
# MemoryError in seconds instead of eating the machine. A CUDA context maps far more than
# this, so it is only set where there is no GPU.
ADDRESS_SPACE = 3 * 1024**3

# The CLI run in a fresh interpreter: RUSAGE_CHILDREN is then exactly that run's processes.
_MEASURED_RUN = """
import json, resource, sys
from pathlib import Path
limit = int(sys.argv[2])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from tests.support import run_cli
repo = Path(sys.argv[1])
result = run_cli("fix", "train.py", "--dry-run", "--timeout", "120", "--json", str(repo.parent / "report.json"),
                 cwd=repo, timeout=500)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": result.returncode, "peak_kb": peak, "output": (result.stdout + result.stderr)[-3000:]}))
"""

_DATA = """
import itertools
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, IterableDataset

torch.manual_seed(0)
FEATURES = 16


class Points(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(FEATURES, generator=g)
        return x, (x.sum() > 0).long()


class Stream(IterableDataset):
    def __iter__(self):
        g = torch.Generator().manual_seed(1)
        while True:
            x = torch.randn(FEATURES, generator=g)
            yield x, (x.sum() > 0).long()


def make_model():
    return nn.Sequential(nn.Linear({in_features}, 32), nn.ReLU(), nn.Linear(32, 2))


def train_step(model, opt, x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()
"""

# The loop of each form: makemore's InfiniteDataLoader (a kept iterator, re-made on StopIteration)
FORMS = {
    "makemore": """
class InfiniteDataLoader:
    def __init__(self, dataset, **kwargs):
        train_sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=int(1e10))
        self.train_loader = DataLoader(dataset, sampler=train_sampler, **kwargs)
        self.data_iter = iter(self.train_loader)

    def next(self):
        try:
            batch = next(self.data_iter)
        except StopIteration:
            self.data_iter = iter(self.train_loader)
            batch = next(self.data_iter)
        return batch


model = make_model()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
batch_loader = InfiniteDataLoader(Points(1000), batch_size=32, pin_memory=True, num_workers=0)
step = 0
while True:
    X, Y = batch_loader.next()
    loss = train_step(model, opt, X, Y)
    step += 1
    if step >= 10 ** 9:
        break
print("trained", loss)
""",
    # minGPT's Trainer.run: a kept iterator in a while loop with a max_iters check
    "mingpt": """
class Trainer:
    def __init__(self, model, dataset, batch_size, max_iters):
        self.model, self.dataset = model, dataset
        self.batch_size, self.max_iters = batch_size, max_iters
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def run(self):
        train_loader = DataLoader(
            self.dataset,
            sampler=torch.utils.data.RandomSampler(self.dataset, replacement=True, num_samples=int(1e10)),
            shuffle=False,
            batch_size=self.batch_size,
        )
        self.model.train()
        self.iter_num = 0
        data_iter = iter(train_loader)
        while True:
            try:
                batch = next(data_iter)
            except StopIteration:
                data_iter = iter(train_loader)
                batch = next(data_iter)
            x, y = batch
            self.loss = train_step(self.model, self.optimizer, x, y)
            self.iter_num += 1
            if self.max_iters is not None and self.iter_num >= self.max_iters:
                break


trainer = Trainer(make_model(), Points(1000), batch_size=64, max_iters=1000000)
trainer.run()
print("trained", trainer.loss)
""",
    "sampler_1e12": """
model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sampler = torch.utils.data.RandomSampler(Points(500), replacement=True, num_samples=10 ** 12)
loader = DataLoader(Points(500), batch_size=64, sampler=sampler)
for epoch in range(3):
    for x, y in loader:
        loss = train_step(model, opt, x, y)
print("trained", loss)
""",
    # an endless sampler of the user's that has no length
    "infinite_sampler": """
class InfiniteRandomSampler(torch.utils.data.Sampler):
    def __init__(self, size):
        self.size = size

    def __iter__(self):
        while True:
            yield from torch.randint(self.size, (1024,)).tolist()


model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Points(500), batch_size=64, sampler=InfiniteRandomSampler(500))
for step, (x, y) in enumerate(loader):
    loss = train_step(model, opt, x, y)
    if step >= 10 ** 9:
        break
print("trained", loss)
""",
    "iterable_dataset": """
model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(DataLoader(Stream(), batch_size=32)):
    loss = train_step(model, opt, x, y)
    if step == 10 ** 9:
        break
print("trained", loss)
""",
    "generator": """
def forever(loader):
    while True:
        for batch in loader:
            yield batch


model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = forever(DataLoader(Points(300), batch_size=32, shuffle=True))
for step in range(10 ** 9):
    x, y = next(batches)
    loss = train_step(model, opt, x, y)
print("trained", loss)
""",
    "cycle": """
model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Points(300), batch_size=32, shuffle=True)
for step, (x, y) in enumerate(itertools.cycle(loader)):
    loss = train_step(model, opt, x, y)
    if step >= 10 ** 9:
        break
print("trained", loss)
""",
}


def _measured_fix(tmp_path: Path, script: str) -> dict[str, object]:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text(script)
    commit_all(repo)
    limit = 0 if cuda_available() else ADDRESS_SPACE
    measured = subprocess.run([sys.executable, "-c", _MEASURED_RUN, str(repo), str(limit)], cwd=ROOT,
                              capture_output=True, text=True, timeout=600, check=False)
    assert measured.returncode == 0, measured.stderr
    result: dict[str, object] = json.loads(measured.stdout.strip().splitlines()[-1])
    result["report"] = json.loads((tmp_path / "report.json").read_text())
    return result


@pytest.mark.parametrize("bug", [False, True], ids=["working", "wrong_linear"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_lazy_iteration_reaches_the_real_outcome_in_bounded_memory(tmp_path: Path, form: str, bug: bool) -> None:
    script = _DATA.format(in_features=20 if bug else "FEATURES") + FORMS[form]
    measured = _measured_fix(tmp_path, script)
    report, output = measured["report"], measured["output"]
    assert isinstance(report, dict)
    if bug:
        assert report["status"] == "fixed", output
        fixes = [a["fix"] for a in report["attempts"] if "fix" in a]
        assert [f["pattern"] for f in fixes] == ["linear-in-features"], output
        assert "MemoryError" not in str(output)
    else:
        assert report["status"] == "already-passing", output
        assert measured["rc"] == 0, output
    peak = measured["peak_kb"]
    assert isinstance(peak, int) and peak < RSS_BOUND_KB, f"peak RSS {peak} kB\n{output}"


# --- the last batch's plan ----------------------------------------------------------------------

PLANS = """
import torch
from torch.utils.data import DataLoader, Sampler, Subset, TensorDataset, sampler as samplers

data = TensorDataset(torch.arange(500).float())


class Reversed(Sampler):
    # a custom order (a length-sorted sampler's): its last indices are 0, 1, ...
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(range(self.n - 1, -1, -1))


class Endless(Sampler):
    def __len__(self):
        return 2 ** 31

    def __iter__(self):
        while True:
            yield 7


class SizedAsData(Sampler):
    # an endless sampler whose __len__ is its dataset's: run to the end its length says
    def __len__(self):
        return 500

    def __iter__(self):
        i = 0
        while True:
            yield i % 500
            i += 1


class Unsized(Sampler):
    def __iter__(self):
        return iter(range(500))


loaders = {
    "sequential": DataLoader(data, batch_size=64),
    "shuffled": DataLoader(data, batch_size=64, shuffle=True),
    "subset": DataLoader(data, batch_size=16, sampler=samplers.SubsetRandomSampler(list(range(100, 150)))),
    "num_samples": DataLoader(data, batch_size=16, sampler=samplers.RandomSampler(data, replacement=True, num_samples=70)),
    "weighted": DataLoader(data, batch_size=16, sampler=samplers.WeightedRandomSampler(torch.ones(500), 37)),
    "custom": DataLoader(data, batch_size=64, sampler=Reversed(500)),
    "listed": DataLoader(data, batch_size=64, sampler=list(range(499, 99, -1))),
    "endless": DataLoader(data, batch_size=64, sampler=Endless()),
    "sized_as_data": DataLoader(data, batch_size=64, sampler=SizedAsData()),
    "unsized": DataLoader(data, batch_size=64, sampler=Unsized()),
    "huge": DataLoader(data, batch_size=64, sampler=samplers.RandomSampler(data, replacement=True, num_samples=10 ** 12)),
    # the health checks' index sets: a Subset of 1e12 indices is compared by sample hashes
    "subset_huge": DataLoader(Subset(data, range(10 ** 12)), batch_size=64),
}
for name, loader in loaders.items():
    batches = [[int(v) for v in x.tolist()] for (x,) in loader]
    print(name, len(loader) if name not in ("unsized", "endless") else None, [len(b) for b in batches],
          sum(batches, []) if name in ("sequential", "custom", "listed") else len(set(sum(batches, []))))
"""


def test_last_batch_is_planned_from_the_pass_sampler_lazily(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(PLANS).lstrip())
    with SubprocessRunner(scratch_root=tmp_path / "scratch") as runner:
        result = runner.run(RunRequest(script=script, cwd=tmp_path))
    assert result.status is RunStatus.PASSED, result.stderr
    seen = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in result.stdout.splitlines()}
    # the true tail of a sequential order: 500 % 64 = 52 samples, 448..499
    assert seen["sequential"] == "3 [2, 2, 52] %s" % [0, 1, 2, 3, *range(448, 500)]
    # a random order: the indices that follow the cut batches, none yielded twice in the pass
    assert seen["shuffled"] == "3 [2, 2, 52] 56"
    # the pass's own length: 50 % 16, 70 % 16, 37 % 16 (not the dataset's 500 % 16 = 4)
    assert seen["subset"] == "3 [2, 2, 2] 6"
    assert seen["num_samples"].startswith("3 [2, 2, 6] ")
    assert seen["weighted"].startswith("3 [2, 2, 5] ")
    # a custom order run to its end (it may sort by length): its own last 52 indices
    assert seen["custom"] == "3 [2, 2, 52] %s" % [499, 498, 497, 496, *range(51, -1, -1)]
    assert seen["sized_as_data"] == "3 [2, 2, 52] 56"
    # an index list as the sampler: its own last items (400 % 64 = 16)
    assert seen["listed"] == "3 [2, 2, 16] %s" % [499, 498, 497, 496, *range(115, 99, -1)]
    # no length, or a pass the real run never finishes: no last batch, the cut only
    assert seen["endless"] == "None [2, 2] 1"
    assert seen["unsized"] == "None [2, 2] 4"
    assert seen["huge"] == "2 [2, 2] 4"
    assert seen["subset_huge"] == "2 [2, 2] 4"
    plans = {(p.size, p.dataset, p.batch_size) for p in result.evidence.limits.last_batches}
    assert plans == {(52, 500, 64), (2, 50, 16), (6, 70, 16), (5, 37, 16), (16, 400, 64)}


def test_leakage_index_sets_are_bounded() -> None:
    from repairbot.trace.harness.health import data_leakage

    assert data_leakage._index_list([[3, 1], [2]]) == {1, 2, 3}
    assert data_leakage._index_list(range(10)) == set(range(10))
    # past 2**20 indices (a list of 1e12 would never end): the hashes decide
    assert data_leakage._index_list(range(10 ** 12)) == data_leakage._UNKNOWN
    assert data_leakage._index_list([list(range(1000))] * 2000) == set(range(1000))
    assert data_leakage._index_list([[i, i + 1] for i in range(0, 2**21, 2)]) == data_leakage._UNKNOWN
