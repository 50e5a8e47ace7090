"""The "conv-history" probe (runs in the harness, under the user's interpreter: Python 3.8,
standard library and torch only; loaded by path, see repairbot/trace/harness/probe.py).

On in the rerun that gathers evidence for a conv's channel mismatch, it records what the run
did to the project's convolutions before the failure:

- ``loads``: each ``nn.Module.load_state_dict`` that the run executed (the user's own call or a
  library's, such as Lightning's ``load_from_checkpoint``) and the convolutions whose weight it
  filled: a conv whose weights came from a checkpoint must not be resized, while a load in a
  branch the run never took (``if args.resume:``) or one that left the conv out (``strict=False``
  on a partial checkpoint) does not stand in the way;
- ``forwards``: each convolution that completed a forward, how many times, and the channel
  counts of the inputs it was given that no autograd graph made (data, not another model's
  output, such as a GAN discriminator's generated batch): a conv that already took data of its
  ``in_channels`` and then fails on another count was given data whose channels changed (a
  grayscale image among RGB ones).
"""

from typing import Any, Dict, List

NAME = "conv-history"
OPT_IN = True
# {loads: [{model, model_site, site, convs: [{name, type, in_channels, site}]}],
#  forwards: [{type, site, in_channels, forwards, channels}]}
EVIDENCE_KEY = "conv_history"

_MAX_LOADS = 20
_MAX_CONVS = 64


def install(run: Any) -> Any:
    from repairbot_harness.frames import short_site, user_call_site
    from repairbot_harness.identity import IdentityWeakKeyDict

    torch, module_sites = run.torch, run.state.module_sites
    conv_types = tuple(
        klass for klass in (getattr(torch.nn.modules.conv, "_ConvNd", None),) if isinstance(klass, type)
    ) or (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    loads: List[Dict[str, Any]] = []
    forwards: 'IdentityWeakKeyDict[Any, Dict[str, Any]]' = IdentityWeakKeyDict()
    depth = [0]  # a subclass's load_state_dict calling super() is one load

    def loaded_convs(model: Any, keys: Any) -> List[Dict[str, Any]]:
        convs: List[Dict[str, Any]] = []
        for name, module in model.named_modules():
            if not isinstance(module, conv_types) or (name + ".weight" if name else "weight") not in keys:
                continue
            convs.append({
                "name": name, "type": type(module).__name__,
                "in_channels": getattr(module, "in_channels", None),
                "site": short_site(module_sites.get(module)),
            })
            if len(convs) >= _MAX_CONVS:
                break
        return convs

    def load_state_dict(call: Any, self: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        depth[0] += 1
        try:
            result = call(self, state_dict, *args, **kwargs)
        finally:
            depth[0] -= 1
        # only a load that succeeded put weights in the model
        if depth[0] == 0 and len(loads) < _MAX_LOADS:
            try:
                keys = frozenset(str(key) for key in state_dict)
                loads.append({
                    "model": type(self).__name__,
                    "model_site": short_site(module_sites.get(self)),
                    "site": short_site(user_call_site()),
                    "convs": loaded_convs(self, keys),
                })
            except Exception:
                pass
        return result

    def forward_hook(module: Any, args: Any, output: Any) -> None:
        if output is None or not isinstance(module, conv_types):
            return  # output None: the forward raised (the hook is always called)
        try:
            seen = forwards.get(module)
            if seen is None:
                if len(forwards) >= _MAX_CONVS:
                    return
                seen = forwards[module] = {
                    "type": type(module).__name__, "site": short_site(module_sites.get(module)),
                    "in_channels": getattr(module, "in_channels", None), "forwards": 0, "channels": [],
                }
            seen["forwards"] += 1
            first = args[0] if args else None
            # only inputs that no autograd graph made count (data, not a generator's output)
            if isinstance(first, torch.Tensor) and first.dim() >= 2 and first.grad_fn is None:
                channels = int(first.shape[1]) if first.dim() == len(getattr(module, "kernel_size", ())) + 2 else int(first.shape[0])
                if channels not in seen["channels"]:
                    seen["channels"].append(channels)
        except Exception:
            pass

    hooks = run.torch_hooks()
    hooks.around(torch.nn.Module, "load_state_dict", load_state_dict)
    hooks.forward.add(forward_hook)
    return lambda: {"loads": loads, "forwards": [dict(record) for record in list(forwards.values())]}
