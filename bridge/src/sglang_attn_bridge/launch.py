"""Launch a compiled kernel again without Triton's per-call argument binding.

`kernel[grid](*args, **kw)` re-derives the specialization of every argument on every call (types, 16-byte alignment
of pointers, integers equal to 1 or divisible by 16) before it finds the compiled kernel: for our 40-odd arguments
that is most of a launch's ~100 us of CPU time, and a short attention call is four launches. Here the first call
with a given specialization goes through Triton (compiling if needed) and the compiled kernel is remembered under a
key that holds at least what Triton specializes on, so a hit is the kernel Triton would have picked; later calls
launch it directly through its own launcher (`CompiledKernel[grid](*args)`). The interpreter always takes Triton's
path, and so does every launch with the `direct_launch` setting off (settings.py).
"""

from __future__ import annotations

import torch

from . import settings

try:  # the direct path reads Triton 3.6's launch hooks and allocator; an older Triton keeps its own runner
    from triton import knobs
    from triton.runtime import _allocation
except ImportError:
    knobs = _allocation = None

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
    s = settings.current()
    if s.interpreter or not s.direct_launch:
        fn[grid](*args, **kwargs)
        return
    key = (fn, sig) if sig is not None else (fn, *map(_spec, args), *kwargs.items())
    hit = _kernels.get(key)
    if hit is None:
        if any(p.is_constexpr for p in fn.params[: len(args)]):  # their values would need to be in the key
            raise TypeError(f"{fn.__name__}: pass constexpr parameters by keyword")
        kernel = fn.run(*args, grid=grid, warmup=False, **kwargs)
        params = fn.signature.parameters
        # the parameters after the runtime ones (constexprs): their values are fixed by the key
        tail = tuple(kwargs.get(name, params[name].default) for name in fn.arg_names[len(args) :])
        _kernels[key] = (kernel, tail, _direct_launcher(kernel) if torch.cuda.is_available() else None)
        return
    kernel, tail, direct = hit
    full = (*args, *tail)
    if direct is None or _hooks_set():
        kernel[(*grid, 1, 1)[:3]](*full)
        return
    run, function, packed = direct
    gx, gy, gz = (*grid, 1, 1)[:3]
    stream = torch._C._cuda_getCurrentRawStream(torch.cuda.current_device())
    scratch = None
    if run.global_scratch_size > 0:  # device-built TMA descriptors: the allocator triton.set_allocator installed
        size = gx * gy * gz * run.num_ctas * run.global_scratch_size
        scratch = _allocation._allocator.get()(size, run.global_scratch_align, stream)
    run.launch(
        gx,
        gy,
        gz,
        stream,
        function,
        run.launch_cooperative_grid,
        run.launch_pdl,
        scratch,
        None,
        packed,
        None,
        None,
        None,
        *full,
    )


def _hooks_set() -> bool:
    """Whether a launch hook is installed (a profiler's): then Triton's runner, which builds their metadata, runs.
    Triton 3.6 keeps them as chains that are empty when unset."""
    if knobs is None:
        return True
    return any(
        h is not None and getattr(h, "calls", True)
        for h in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    )


def _direct_launcher(kernel):
    """(launcher, function, packed metadata) to call the compiled kernel's C launcher with, as its own runner
    (`CompiledKernel.__getitem__`) does, or None where that runner is not Triton 3.6's CUDA one (then the runner
    runs): the runner's per-call Python (a closure, device and stream look-ups, launch metadata, the scratch
    helpers) is a tenth of a short launch's CPU time on the H200 machine."""
    run = kernel.run
    needed = (
        "launch",
        "global_scratch_size",
        "global_scratch_align",
        "profile_scratch_size",
        "num_ctas",
        "launch_cooperative_grid",
        "launch_pdl",
    )
    if type(run).__name__ != "CudaLauncher" or not all(hasattr(run, n) for n in needed) or run.profile_scratch_size:
        return None
    return run, kernel.function, kernel.packed_metadata
