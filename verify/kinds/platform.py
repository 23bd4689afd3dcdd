"""platform: torch was built for the platform the image claims (and a ROCm image carries no CUDA wheels)."""

from __future__ import annotations

import fnmatch
import re
from typing import Any, List

from ..result import CheckResult
from .base import Gate, config_error, import_module, short

PLATFORMS = ("rocm", "cuda", "cpu")
NVIDIA_CUDA_WHEEL = "nvidia-*-cu*"


def cuda_wheels() -> List[str]:
    """Installed distributions named like ``nvidia-*-cu*`` (CUDA runtime wheels that must not be in a ROCm image)."""
    import importlib.metadata  # only the rocm gate needs it; it costs ~15 ms of start-up

    names = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata.get("Name") if dist.metadata is not None else None  # type: ignore[attr-defined]  # an email.message.Message
        if not name:
            continue
        norm = re.sub(r"[-_.]+", "-", name).lower()
        if fnmatch.fnmatchcase(norm, NVIDIA_CUDA_WHEEL):
            names.add(norm)
    return sorted(names)


class Platform(Gate):
    key = "platform"
    kind = "platform"
    order = 50
    passes_when = (
        "rocm: `torch.version.hip` set and no distribution named `nvidia-*-cu*`; cuda: `torch.version.cuda` set; "
        "cpu: always (reports torch's build)"
    )

    def parse(self, value: Any, where: str) -> List[str]:
        if value not in PLATFORMS:
            raise config_error(where, self.key, "must be one of %s, got %r" % ("|".join(PLATFORMS), value))
        return [value]

    def dump(self, items: List[str]) -> Any:
        return items[0]

    def add_flags(self, parser: Any) -> None:
        parser.add_argument(
            "--platform",
            choices=PLATFORMS,
            help="rocm: torch.version.hip and no nvidia-*-cu* wheel; cuda: torch.version.cuda; cpu: no requirement",
        )

    def from_flags(self, args: Any) -> List[str]:
        return [args.platform] if args.platform else []

    def merge(self, from_config: List[str], from_flags: List[str]) -> List[str]:
        return from_flags or from_config  # --platform replaces the config's

    def check(self, platform: str) -> CheckResult:
        mod, failure = import_module("torch")
        build = "torch not importable"
        hip = cuda = None
        if mod is not None:
            version = getattr(mod, "version", None)
            hip, cuda = getattr(version, "hip", None), getattr(version, "cuda", None)
            build = "torch %s hip=%s cuda=%s" % (getattr(mod, "__version__", "?"), hip, cuda)
        problems = []
        if platform in ("rocm", "cuda") and mod is None:
            assert failure is not None  # import_module gives a failure when it gives no module
            problems.append("torch import failed: %s" % failure.detail)
        elif platform == "rocm":
            if not hip:
                problems.append("torch.version.hip is not set")
            wheels = cuda_wheels()
            if wheels:
                problems.append("CUDA wheels installed: %s" % ", ".join(wheels))
        elif platform == "cuda" and not cuda:
            problems.append("torch.version.cuda is not set")
        if problems:
            return CheckResult(
                "platform",
                platform,
                False,
                short("; ".join(problems) + " (%s)" % build),
                log=failure.log if failure else "",
            )
        return CheckResult("platform", platform, True, build)
