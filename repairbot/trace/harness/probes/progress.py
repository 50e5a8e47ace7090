"""How far the run got: optimizer steps and module forwards counted (batches are counted by
the DataLoader limits), and left on disk now and then (RunState.heartbeat)."""

from typing import Any

from ..context import Run

NAME = "progress"


def install(run: Run) -> None:
    state = run.state

    def forward_pre_hook(module: Any, args: Any) -> None:
        state.forwards += 1
        state.heartbeat()

    def step_post_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        state.steps += 1
        state.heartbeat()

    run.torch_hooks().forward_pre.add(forward_pre_hook)
    run.torch_hooks().step_post.add(step_post_hook)
