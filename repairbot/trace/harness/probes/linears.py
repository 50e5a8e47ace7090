"""Where each ``nn.Linear`` was constructed and the input shape it last saw."""

from typing import Any, Dict

from ..context import Run
from ..frames import shape, user_call_site

NAME = "linears"


def install(run: Run) -> None:
    state = run.state
    nn = run.torch.nn

    def linear_init(call: Any, self: Any, *args: Any, **kwargs: Any) -> None:
        call(self, *args, **kwargs)
        record: Dict[str, Any] = {
            "index": len(state.linears),
            "type": type(self).__name__,
            "in_features": int(getattr(self, "in_features", 0) or 0),
            "out_features": int(getattr(self, "out_features", 0) or 0),
            "site": user_call_site(skip_self=self),
            "input_shape": None,
            "calls": 0,
            "layer_site": state.layer_site_index.get(self),
        }
        state.linear_index[self] = record["index"]
        state.linears.append(record)

    def forward_pre_hook(module: Any, args: Any) -> None:
        index = state.linear_index.get(module)
        if index is not None and args:
            record = state.linears[index]
            record["input_shape"] = shape(args[0])
            record["calls"] += 1

    run.torch_hooks().layer_init(nn.Linear, linear_init)
    run.torch_hooks().forward_pre.add(forward_pre_hook)
