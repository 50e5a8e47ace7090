"""How far the run got: optimizer steps and module forwards counted (batches are counted by
the DataLoader limits), and left on disk now and then (RunState.heartbeat)."""

NAME = "progress"


def install(run):
    state = run.state

    def forward_pre_hook(module, args):
        state.forwards += 1
        state.heartbeat()

    def step_post_hook(optimizer, args, kwargs):
        state.steps += 1
        state.heartbeat()

    run.hooks.forward_pre.add(forward_pre_hook)
    run.hooks.step_post.add(step_post_hook)
