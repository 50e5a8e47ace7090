"""device-idle: CUDA is available, the model trains on the CPU."""

from typing import Optional, Set

from .core import Finding, HealthCheck


class DeviceIdle(HealthCheck):
    """A GPU is there, yet every parameter the optimizer steps lives on the CPU.

    What it finds:
        CUDA is available but every parameter the optimizer steps is on the CPU (checked only
        where a GPU exists). The finding points to the first optimizer step and records the
        CUDA devices, the parameter tensors and their devices, and the optimizers. Silent with
        no GPU, or when the model is on it.

    Why it matters:
        The run trains on the CPU, many times slower than it could, and nothing says so.

    Fix safety:
        No fix is offered: moving the model and its batches to the GPU (``.to(device)``)
        touches every place tensors are made.

    Not handled:
        Only CUDA is asked (not MPS or other accelerators), and only where the parameters are:
        a model partly left on the CPU, or on the GPU but starved by its input pipeline, is not
        reported.
    """

    ID = "device-idle"
    TITLE = "CUDA is available but the model trains on the CPU"
    ORDER = 60

    def findings(self) -> Optional[Finding]:
        torch = self.core.torch
        try:
            if not torch.cuda.is_available():
                return None
            count = torch.cuda.device_count()
        except Exception:
            return None
        live = [r for r in self.core.records if r["live_steps"]]
        devices: Set[str] = set()
        params = 0
        for record in live:
            devices.update(record["devices"])
            params += len(record["params"])
        if not params or devices != set(["cpu"]):
            return None
        message = (
            "CUDA is available (%d device%s) but every parameter the optimizer steps is on the CPU: "
            "the model trains on the CPU" % (count, "" if count == 1 else "s")
        )
        evidence = {"cuda_devices": count, "parameter_tensors": params, "parameter_devices": sorted(devices),
                    "optimizers": [r["type"] for r in live]}
        return self.finding(live[0]["site"], message, evidence)
