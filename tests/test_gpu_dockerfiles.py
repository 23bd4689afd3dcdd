"""Every rendered GPU Dockerfile, parsed by real Dockerfile parsers: GPU images cannot be built here (no registry, no
GPU), so their structure and their use of the spec are checked statically with dockerfile-parse, and their syntax
with BuildKit's own parser (buildx 0.13 has no `--check`; see _buildkit_parse)."""

from __future__ import annotations

import io
import re

import pytest
from dockerfile_parse import DockerfileParser

from toolkit.gates.report import NONCE_ARG
from toolkit.plan.build_plan import make_plan
from toolkit.render.context import context_files
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog
from toolkit.steps import applies, expand
from toolkit.steps.closure import FILE as CLOSURE_FILE

CATALOG = load_catalog()
GPU = sorted(n for n, v in CATALOG.variants.items() if v.family in ("rocm", "cuda"))
INSTRUCTIONS = {"FROM", "SHELL", "ARG", "WORKDIR", "ENV", "RUN", "COPY", "LABEL", "CMD", "COMMENT", "ADD"}
_BIND = re.compile(r"--mount=type=bind,source=([^,\s]+)")


def parsed(name, sets=()):
    plan = make_plan(CATALOG.variants[name], sets=list(sets), revision="parse")
    parser = DockerfileParser(fileobj=io.BytesIO(render(plan).encode()))
    return plan, parser


@pytest.mark.parametrize("name", GPU)
def test_structure(name):
    plan, df = parsed(name)
    v = plan.variant
    kinds = [i["instruction"] for i in df.structure]
    assert set(kinds) <= INSTRUCTIONS, set(kinds) - INSTRUCTIONS
    # One image stage on the base; before it, one scratch stage per checksum-pinned artifact, which holds exactly
    # one ADD with the lock's digest (the only ADDs of the file).
    froms = [i["value"] for i in df.structure if i["instruction"] == "FROM"]
    adds = [i["value"] for i in df.structure if i["instruction"] == "ADD"]
    assert froms[-1] == v.base and df.baseimage == v.base and len(froms) == len(adds) + 1
    for stage, add in zip(froms[:-1], adds):
        art = stage.removeprefix("scratch AS art-")
        record = next(r for n, r in v.artifacts.items() if n.replace("_", "-") == art)
        assert add.startswith(f"--checksum=sha256:{record['sha256']} [") and record["url"] in add
    for copy in (i["value"] for i in df.structure if i["instruction"] == "COPY"):
        assert copy.startswith("--from=src-"), copy  # only source trees; files of the context are bind-mounted
    # Every build arg comes from the spec (its clock included), but the gate step's nonce.
    assert df.args == {**v.args, "SOURCE_DATE_EPOCH": str(v.source_date_epoch), NONCE_ARG: ""}
    for key, value in v.env.items():
        assert df.envs.get(key) == value, key
    runs = [i["value"] for i in df.structure if i["instruction"] == "RUN"]
    assert "python3 -m verify --config gates.json" in runs[-1]  # the gates are the last build step
    assert "sglang_attn_bridge" not in " ".join(runs[:-2]) and "/tmp/sglang-attn-bridge" in runs[-2]
    assert df.labels["io.miles.variant"] == name
    context = {path.split("/")[0] for path in context_files(plan)} | {"patches", CLOSURE_FILE}  # written by stage
    for run in runs:
        for source in _BIND.findall(run):
            assert source in context, "RUN binds %r, which the staged context does not hold" % source


@pytest.mark.parametrize("name", GPU)
def test_every_pin_of_the_spec_is_installed(name):
    """A pin the Dockerfile never uses is a pin that does not hold: each pip version and commit appears in a RUN."""
    plan, df = parsed(name)
    runs = " ".join(i["value"] for i in df.structure if i["instruction"] == "RUN")
    skipped = {
        n for s in plan.variant.steps if not applies(s, plan.variant.args) for n in s["value"] if s["kind"] == "pip"
    }
    for package, version in plan.variant.pip.items():  # a `${ARG}` in a name reaches the shell as "${ARG}"
        if package in skipped:  # only a step the variant's args leave out (`when`) installs it
            assert "==" + version not in runs, package
            continue
        word = package.split("[")[0].replace("${", '"${').replace("}", '}"')
        hashed = f"{expand(package, plan.variant.args)}=={version} --hash=sha256:"  # a locked pin: its name expanded
        assert ("==" + version in runs and word in runs) or hashed in runs, package
    text = " ".join(i["value"] for i in df.structure)
    for comp in plan.variant.components:  # each git component is a named build context some step reads
        assert "from=src-%s" % comp in text or "--from=src-%s " % comp in text, comp
    for patch in plan.variant.patches:
        assert "/tmp/patches/" + patch["file"].rsplit("/", 1)[-1] in runs


def test_requirements_exclusions_are_spec_data():
    _, rocm = parsed("rocm720-mi35x")
    _, cuda = parsed("cu13-x86")
    step = [i["value"] for i in rocm.structure if "/tmp/tools/requirements.py" in i["value"]]
    assert len(step) == 1 and "/tmp/requirements.in --exclude nvidia-resiliency-ext >" in step[0]
    step = [i["value"] for i in cuda.structure if "/tmp/tools/requirements.py" in i["value"]]
    assert len(step) == 1 and "/tmp/requirements.in >" in step[0]


def _buildkit_parse(tmp_path, text):
    """BuildKit's own Dockerfile parser, without building: a target stage that does not exist is looked up only after
    every instruction and flag parsed, and before any image is resolved (nothing is pulled, no registry needed)."""
    import subprocess

    (tmp_path / "Dockerfile").write_text(text)
    run = subprocess.run(
        ["docker", "buildx", "build", "--progress=plain", "--target", "gpu-gates-parse-only", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return run.stdout + run.stderr


@pytest.mark.docker
@pytest.mark.parametrize("name", GPU)
def test_buildkit_parses_every_instruction(tmp_path, name):
    plan, _ = parsed(name)
    out = _buildkit_parse(tmp_path, render(plan))
    assert 'target stage "gpu-gates-parse-only" could not be found' in out and "parse error" not in out, out


@pytest.mark.docker
def test_buildkit_parse_check_can_fail(tmp_path):
    plan, _ = parsed("cu13-x86")
    out = _buildkit_parse(tmp_path, render(plan).replace("COPY --from=src-miles", "COPY --fromm=src-miles"))
    assert "dockerfile parse error" in out and "unknown flag: fromm" in out, out


@pytest.mark.parametrize("name", sorted(n for n in GPU if CATALOG.variants[n].family == "cuda"))
def test_the_transformer_engine_gate_checks_the_pinned_version(name):
    v = CATALOG.variants[name]
    (gate,) = [c for c in v.gates["commands"] if c["name"] == "transformer-engine-triplet"]
    assert gate["argv"][-1] == v.pip["transformer-engine[pytorch]"] == v.pip["transformer-engine-cu${CUDA_MAJOR}"]


@pytest.mark.parametrize("name", GPU)
def test_every_kernel_step_has_an_import_gate(name):
    """A kernel installed but never imported is how a broken build ships: each one miles' defaults need is gated."""
    v = CATALOG.variants[name]
    gated = set(v.gates["imports"]) | set(v.gates.get("gpu_imports", []))
    needed = {"sglang", "sgl_kernel", "miles.backends.fsdp_utils", "megatron.core", "flash_attn", "transformer_engine"}
    if v.family == "cuda":
        needed |= {
            "flash_attn_interface",
            "apex",
            "fused_weight_gradient_mlp_cuda",
            "fake_int4_quant_cuda",
            "emerging_optimizers.orthogonalized_optimizers",
        }
    assert needed <= gated, needed - gated
    assert v.gates["provenance"]["sglang"] == "/sgl-workspace/sglang/python"
    assert v.gates["provenance"]["megatron.core"] == "/root/Megatron-LM"  # megatron/ itself is a namespace package
