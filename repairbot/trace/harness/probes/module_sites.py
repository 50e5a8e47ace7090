"""Where each ``nn.Module`` was constructed (the user's line), for the evidence of a failing
module and for the probes that name a module."""

from typing import Any

from ..context import Run
from ..frames import user_call_site

NAME = "module-sites"


def install(run: Run) -> None:
    module_sites = run.state.module_sites

    def module_init(call: Any, self: Any, *args: Any, **kwargs: Any) -> None:
        call(self, *args, **kwargs)
        try:
            module_sites[self] = user_call_site(skip_self=self)
        except TypeError:
            pass

    run.torch_hooks().layer_init(run.torch.nn.Module, module_init)
