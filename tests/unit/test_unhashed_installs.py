"""Every pip install of a CUDA render installs a locked file, a pinned tree with --no-deps, or nothing (an offline
check): the one exception is flashinfer's own index, which this host cannot reach to lock (ci/unhashed_installs.py)."""

from __future__ import annotations

import pytest

from ci.unhashed_installs import problems
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

CATALOG = load_catalog()
CUDA = [name for name, v in CATALOG.variants.items() if v.family == "cuda"]


@pytest.mark.parametrize("name", CUDA)
def test_a_cuda_image_installs_only_locked_files(name):
    found = problems(render(make_plan(CATALOG.resolve(name), revision="t")))
    assert [p for p in found if "flashinfer-cubin==" not in p] == []


def test_the_check_sees_an_install_that_resolves_on_its_own():
    run = "RUN pip install --no-cache-dir flash-linear-attention==0.4.2 && pip install --no-deps /tmp/src/x\n"
    assert problems(run) == ["pip install --no-cache-dir flash-linear-attention==0.4.2"]
    hashed = "RUN pip install --no-deps --require-hashes -r /tmp/pip-locked.txt\n"
    assert problems(hashed) == [] and problems("RUN pip install -e /root/Megatron-LM\n") != []
