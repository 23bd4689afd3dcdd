"""Launch a compiled kernel again without Triton's per-call argument binding.

`kernel[grid](*args, **kw)` re-derives the specialization of every argument on every call (types, 16-byte alignment
of pointers, integers equal to 1 or divisible by 16) before it finds the compiled kernel: for our 40-odd arguments
that is most of a launch's ~100 us of CPU time, and a short attention call is four launches. Here the first call
with a given specialization goes through Triton (compiling if needed) and the compiled kernel is remembered under a
key that holds at least what Triton specializes on, so a hit is the kernel Triton would have picked; later calls
launch it directly through its own launcher (`CompiledKernel[grid](*args)`). The interpreter always takes Triton's
path.
"""

from __future__ import annotations

import torch

from . import config

ENABLED = True  # the bench turns it off to compare
_kernels: dict = {}


def _spec(a):
    if isinstance(a, torch.Tensor):
        return a.dtype, a.device, a.data_ptr() % 16 == 0
    if isinstance(a, bool):
        return "b", a
    if isinstance(a, int):
        return "i", a == 1, a % 16 == 0, -(2**31) <= a < 2**31, a >= 2**63
    if isinstance(a, float):
        return "f"
    return "o", a


def clear() -> None:
    _kernels.clear()


def launch(fn, grid, args: tuple, kwargs: dict, sig=None) -> None:
    """fn[grid](*args, **kwargs): args positional (every runtime argument), kwargs the constexprs and options.
    `sig`, when given, is a hashable value that determines every argument's specialization and every kwarg (the
    caller's shapes, strides, dtypes, alignment and plan): then it is the key, and the per-argument checks are
    skipped."""
    if not ENABLED or config.interpreting():
        fn[grid](*args, **kwargs)
        return
    key = (fn, sig) if sig is not None else (fn, *map(_spec, args), *kwargs.items())
    hit = _kernels.get(key)
    if hit is None:
        if any(p.is_constexpr for p in fn.params[: len(args)]):  # their values would need to be in the key
            raise TypeError(f"{fn.__name__}: pass constexpr parameters by keyword")
        kernel = fn.run(*args, grid=grid, warmup=False, **kwargs)
        params = fn.signature.parameters
        tail = tuple((name, params[name].default) for name in fn.arg_names[len(args) :])
        _kernels[key] = (kernel, tail)
        return
    kernel, tail = hit
    kernel[(*grid, 1, 1)[:3]](*args, *(kwargs.get(name, default) for name, default in tail))
