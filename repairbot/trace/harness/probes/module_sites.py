"""Where each ``nn.Module`` was constructed (the user's line), for the evidence of a failing
module and for the probes that name a module."""

from ..frames import user_call_site

NAME = "module-sites"


def install(run):
    module_sites = run.state.module_sites

    def module_init(call, self, *args, **kwargs):
        call(self, *args, **kwargs)
        try:
            module_sites[self] = user_call_site(skip_self=self)
        except TypeError:
            pass

    run.hooks.layer_init(run.torch.nn.Module, module_init)
