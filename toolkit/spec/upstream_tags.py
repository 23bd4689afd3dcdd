"""Upstream's tag names, so a maintainer's existing pull commands keep working (`build.py build --image-tag`).

Upstream's docker/build.py names an image `IMAGE:latestPOSTFIX` (latest), `IMAGE:PREFIXPOSTFIX` plus
`IMAGE:PREFIXPOSTFIX-<UTC YYYYMMDDHHMM>` (dev; PREFIX is "dev", or "miles" for ROCm's `rocm/sgl-dev`), or
`IMAGE:CUSTOMPOSTFIX` (custom). The image, the prefix and each variant's postfix are spec data (`upstream_tags` in
a family). These tags come in addition to the project's own (`<repository>:<variant>` and the input-hash tag),
never instead.
"""

from __future__ import annotations

from datetime import UTC, datetime

from toolkit.errors import UsageError

MODES = ("latest", "dev", "custom")


def upstream_tags(variant, mode: str, custom: str | None = None, now: datetime | None = None) -> list:
    scheme = variant.upstream_tags
    if not scheme:
        raise UsageError(f"--image-tag: {variant.spec_file} has no upstream_tags for {variant.name}")
    image, postfix = scheme["image"], scheme["postfix"]
    if mode == "latest":
        return [f"{image}:latest{postfix}"]
    if mode == "dev":
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%d%H%M")
        return [f"{image}:{scheme['dev_prefix']}{postfix}", f"{image}:{scheme['dev_prefix']}{postfix}-{stamp}"]
    if mode == "custom":
        if not custom:
            raise UsageError("--image-tag custom needs --custom-tag NAME")
        return [f"{image}:{custom}{postfix}"]
    raise UsageError(f"--image-tag: one of {', '.join(MODES)}")
