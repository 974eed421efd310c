"""loom.autocast (also loom.amp.autocast): mixed precision with torch.autocast's policy.

Inside the context, matmuls (and what is built on them: linear layers, attention's products)
run in bfloat16 or float16, while softmax, log_softmax, logsumexp, layer_norm, rms_norm, norm,
cumsum and the losses run in float32; other ops follow the usual type promotion. float64
tensors are left alone. The backward runs with autocast off, in the dtypes the forward's casts
recorded. The state is per thread and per device type.
"""
import functools

from . import _loom


class autocast:  # noqa: N801 (torch's name)
    """Context manager and decorator: autocast(device_type, dtype=None, enabled=True).

    dtype defaults to bfloat16 on the CPU and float16 on CUDA."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type not in ("cpu", "cuda"):
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got "
                             f"{device_type!r}")
        if dtype is not None and dtype not in (_loom.bfloat16, _loom.float16):
            raise ValueError(f"autocast: dtype must be loom.bfloat16 or loom.float16, got "
                             f"{dtype}")
        self.device_type = device_type
        self.fast_dtype = dtype if dtype is not None else _loom.get_autocast_dtype(device_type)
        self.enabled = bool(enabled)
        self._saved = []

    def __enter__(self):
        self._saved.append((_loom.is_autocast_enabled(self.device_type),
                            _loom.get_autocast_dtype(self.device_type)))
        _loom._set_autocast(self.device_type, self.enabled, self.fast_dtype)
        return self

    def __exit__(self, *exc):
        on, dtype = self._saved.pop()
        _loom._set_autocast(self.device_type, on, dtype)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)

        return wrapped
