"""The "loaded-weights" probe (runs in the harness, under the user's interpreter: Python 3.8,
standard library and torch only; loaded by path, see repairbot/trace/harness/probe.py).

Records each ``nn.Module.load_state_dict`` that the run executed (the user's own call or a
library's, such as Lightning's ``load_from_checkpoint``) and the convolutions whose weight it
filled: a conv whose weights came from a checkpoint must not be resized, while a load that
sits in a branch the run never took (``if args.resume:``) or that left the conv out
(``strict=False`` on a partial checkpoint) does not stand in the way.
"""

from typing import Any, Dict, List

NAME = "loaded-weights"
OPT_IN = True
# [{model, model_site, site, convs: [{name, type, in_channels, site}]}]
EVIDENCE_KEY = "loaded_weights"

_MAX_LOADS = 20
_MAX_CONVS = 64


def install(run: Any) -> Any:
    from repairbot_harness.frames import short_site, user_call_site

    torch, module_sites = run.torch, run.state.module_sites
    conv_types = tuple(
        klass for klass in (getattr(torch.nn.modules.conv, "_ConvNd", None),) if isinstance(klass, type)
    ) or (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    records: List[Dict[str, Any]] = []
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
        if depth[0] == 0 and len(records) < _MAX_LOADS:
            try:
                keys = frozenset(str(key) for key in state_dict)
                records.append({
                    "model": type(self).__name__,
                    "model_site": short_site(module_sites.get(self)),
                    "site": short_site(user_call_site()),
                    "convs": loaded_convs(self, keys),
                })
            except Exception:
                pass
        return result

    run.torch_hooks().around(torch.nn.Module, "load_state_dict", load_state_dict)
    return lambda: records
