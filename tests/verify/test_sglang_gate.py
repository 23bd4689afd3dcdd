"""The GPU images' sglang signature gate against the real sglang wheels of every base the specs use, plus the newest.

The gate runs as in an image: ``python -m verify`` with the variant's own gate entries, sglang unpacked from its
PyPI wheel (read in source mode, never imported) and the bridge's source on the path. Seeded drift (a renamed
keyword, an added required parameter, a removed function) must fail. Wheels are downloaded into .cache/sglang-wheels
when missing; a test skips, saying why, only when the download is impossible.
"""

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import result_lines, sglang_wheel

from toolkit.spec.catalog import ROOT as REPO
from toolkit.spec.catalog import load_catalog

BRIDGE_SRC = REPO / "bridge" / "src"
NEWEST = ("0.5.22", "0.5.23")
NEW_MODULE = "sglang.kernels.ops.attention.extend_attention"
OLD_MODULE = "sglang.srt.layers.attention.triton_ops.extend_attention"
FUNCTION = "extend_attention_fwd_unified"


def _gpu_variants():
    return {n: v for n, v in load_catalog().variants.items() if v.family in ("rocm", "cuda")}


def _base_sglang(variant) -> str:
    """The sglang version a base image carries, from its tag (``...:v0.5.16-cu129`` -> ``0.5.16``)."""
    match = re.search(r":v(\d+\.\d+\.\d+)", variant.base)
    assert match, "base tag %r names no sglang version" % variant.base
    return match.group(1)


CASES = sorted({(_base_sglang(v), name) for name, v in _gpu_variants().items()})
DEFAULT = "rocm720-mi35x"
VERSIONS = sorted({ver for ver, _ in CASES} | set(NEWEST), key=lambda s: tuple(map(int, s.split("."))))


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    """unpacked(version) -> a directory holding that wheel's ``sglang/`` Python sources (cached per module)."""
    done = {}

    def get(version):
        if version not in done:
            root = tmp_path_factory.mktemp("sglang-%s" % version)
            with zipfile.ZipFile(sglang_wheel(version)) as zf:
                zf.extractall(root, [n for n in zf.namelist() if n.startswith("sglang/") and n.endswith(".py")])
            done[version] = root
        return done[version]

    return get


def _gate(run_verify, tmp_path, variant_name, site):
    cfg = {"signatures": _gpu_variants()[variant_name].gates["signatures"]}
    path = tmp_path / "gates.json"
    path.write_text(json.dumps(cfg))
    return run_verify("--config", path, pythonpath=[site, BRIDGE_SRC])


def test_no_variant_names_a_kernel_module_by_hand():
    for name, variant in _gpu_variants().items():
        entries = variant.gates["signatures"]
        assert entries and all("resolve" in e and "target" not in e for e in entries), name
        assert "sglang." not in json.dumps(entries), name


@pytest.mark.parametrize("version,variant", CASES + [(v, DEFAULT) for v in NEWEST])
def test_gate_passes_on_real_sglang(run_verify, tmp_path, unpacked, version, variant):
    site = unpacked(version)
    run = _gate(run_verify, tmp_path, variant, site)
    assert run.returncode == 0, run.stdout + run.stderr
    passed = result_lines(run.stdout, "PASS", "signature")
    expected = NEW_MODULE if (site / NEW_MODULE.replace(".", "/")).with_suffix(".py").exists() else OLD_MODULE
    assert len(passed) == 1 and "%s:%s" % (expected, FUNCTION) in passed[0], run.stdout
    assert str(site) in passed[0]  # read from the unpacked wheel, not from anything installed here
    scales = "k_scale, v_scale" in passed[0]
    assert scales, "every base version the specs use takes k_scale/v_scale: %s" % passed[0]


def test_versions_cover_both_module_generations(unpacked):
    """The matrix really exercises the old path and the moved one (so the fallback order is tested)."""
    kinds = {(unpacked(v) / NEW_MODULE.replace(".", "/")).with_suffix(".py").exists() for v in VERSIONS}
    assert kinds == {True, False}


def _kernel_file(site: Path) -> Path:
    for module in (NEW_MODULE, OLD_MODULE):
        path = (site / module.replace(".", "/")).with_suffix(".py")
        if path.exists():
            return path
    raise AssertionError("no kernel module under %s" % site)


def _drifted(unpacked, tmp_path, version, edit) -> Path:
    site = tmp_path / "site"
    shutil.copytree(unpacked(version) / "sglang", site / "sglang")
    path = _kernel_file(site)
    text = path.read_text()
    start = text.index("def %s(" % FUNCTION)
    end = text.index("):", start)
    path.write_text(text[:start] + edit(text[start:end]) + text[end:])
    return site


DRIFTS = {
    "renamed keyword": (lambda d: d.replace("sliding_window_size", "window_size"), "sliding_window_size"),
    "new required parameter": (lambda d: d.replace("max_len_extend,", "max_len_extend, page_table,", 1), "page_table"),
    "removed function": (lambda d: d.replace(FUNCTION, FUNCTION + "_v2", 1), "no top-level definition"),
    "keyword only through **kwargs": (
        lambda d: d.replace("logit_cap=0.0,", "", 1).rstrip().rstrip(",") + ", **kwargs",
        "no parameter named logit_cap",
    ),
}


@pytest.mark.parametrize("version", ["0.5.14", "0.5.16", "0.5.23"])
@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_seeded_drift_fails(run_verify, tmp_path, unpacked, version, drift):
    edit, needle = DRIFTS[drift]
    site = _drifted(unpacked, tmp_path, version, edit)
    run = _gate(run_verify, tmp_path, DEFAULT, site)
    assert run.returncode == 1, run.stdout + run.stderr
    failed = result_lines(run.stdout, "FAIL", "signature")
    assert len(failed) == 1 and needle in failed[0], run.stdout


def test_bridge_resolves_from_the_same_table():
    """The bridge's own resolution order and keywords are the table's (one home, nothing copied)."""
    # A child without site-packages (-S): an editable install of some other checkout cannot answer for this one.
    code = (
        "import json; from verify.source_signature import literal_from_source; "
        "t, p, _ = literal_from_source('sglang_attn_bridge.sglang_api', 'EXTEND_ATTENTION'); "
        "print(json.dumps([t, p]))"
    )
    run = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=REPO,
        env={"PYTHONPATH": f"{REPO}:{BRIDGE_SRC}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    table, path = json.loads(run.stdout)
    assert Path(path).resolve() == (BRIDGE_SRC / "sglang_attn_bridge" / "sglang_api.py").resolve()
    source = (BRIDGE_SRC / "sglang_attn_bridge" / "sglang_resolution.py").read_text()
    assert NEW_MODULE not in source and OLD_MODULE not in source
    assert table["modules"] == [NEW_MODULE, OLD_MODULE] and table["function"] == FUNCTION


TABLE = """
CALL = {"function": "kernel", "modules": ["pkg.new", "pkg.old"], "keywords": ["q", "scale"],
        "groups": [["k_scale", "v_scale"]]}
"""


@pytest.mark.parametrize("mode", [True, False])
def test_resolve_falls_back_like_the_caller(run_verify, write_tree, tmp_path, mode):
    """Import and source mode agree: the new module wins when present, else the old one; a group is all or none."""
    write_tree(
        tmp_path,
        {
            "table/__init__.py": "",
            "table/api.py": TABLE,
            "pkg/__init__.py": "",
            "pkg/old.py": "def kernel(q, k_scale, v_scale, scale=None):\n    pass\n",
        },
    )
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"signatures": [{"resolve": "table.api:CALL", "import": mode}]}))
    run = run_verify("--config", cfg, pythonpath=[tmp_path])
    assert run.returncode == 0 and "pkg.old:kernel  binds q, scale, k_scale, v_scale" in run.stdout, run.stdout
    (tmp_path / "pkg" / "new.py").write_text("def kernel(q, k_scale, scale=None):\n    pass\n")  # v_scale lost
    run = run_verify("--config", cfg, pythonpath=[tmp_path])
    assert run.returncode == 0 and "pkg.old:kernel" in run.stdout, run.stdout  # the caller falls back too
    (tmp_path / "pkg" / "old.py").unlink()
    run = run_verify("--config", cfg, pythonpath=[tmp_path])
    assert run.returncode == 1 and "pkg.new:kernel: no parameter named v_scale" in run.stdout


@pytest.mark.parametrize(
    "entry,key",
    [
        ({"resolve": "a.b:T", "target": "a.b:f"}, "signatures[0]"),
        ({"resolve": "a.b:T", "keywords": ["q"]}, "signatures[0].keywords"),
        ({"resolve": "no_colon"}, "signatures[0].resolve"),
    ],
)
def test_resolve_entry_is_validated(entry, key):
    from verify.config import ConfigError, from_dict

    with pytest.raises(ConfigError, match=re.escape("'%s'" % key)):
        from_dict({"signatures": [entry]}, "gates.json")


def test_table_that_is_not_a_literal_fails(run_verify, write_tree, tmp_path):
    write_tree(tmp_path, {"table/__init__.py": "", "table/api.py": "import os\nCALL = dict(function=os.name)\n"})
    run = run_verify("--signature-source", "x.y:z", "--config", _cfg(tmp_path, "table.api:CALL"), pythonpath=[tmp_path])
    assert run.returncode == 1 and "CALL is not a literal" in run.stdout, run.stdout


def _cfg(tmp_path, ref):
    path = tmp_path / "gates.json"
    path.write_text(json.dumps({"signatures": [{"resolve": ref, "import": False}]}))
    return path


@pytest.mark.docker
def test_gate_and_bridge_agree_inside_an_image_with_real_sglang(docker_client, tmp_path):
    """In an image where sglang really imports (miles-cpu), the gate in both modes and the bridge's own resolve()
    pick the same kernel module. The image is made by `build.py --target miles-cpu`; without it this test skips."""
    import docker

    image = "miles:miles-cpu"
    try:
        docker_client.images.get(image)
    except docker.errors.ImageNotFound:
        pytest.skip("%s is not built here (python3 build.py --target miles-cpu)" % image)
    shutil.copytree(REPO / "verify", tmp_path / "verify")
    entry = {"resolve": "sglang_attn_bridge.sglang_api:EXTEND_ATTENTION"}
    (tmp_path / "gates.json").write_text(
        json.dumps({"signatures": [dict(entry, **{"import": False}), dict(entry, **{"import": True})]})
    )
    script = (
        "python -m verify --config gates.json && python -c 'from sglang_attn_bridge.sglang_resolution import "
        'resolve; print("BRIDGE", resolve().kernel.module)\''
    )
    out = docker_client.containers.run(
        image,
        ["bash", "-c", script],
        remove=True,
        network_mode="none",
        working_dir="/tmp/gates",
        environment={"PYTHONPATH": "/tmp/bridge-src"},
        volumes={
            str(tmp_path): {"bind": "/tmp/gates", "mode": "ro"},
            str(BRIDGE_SRC): {"bind": "/tmp/bridge-src", "mode": "ro"},
        },
    ).decode()
    passed = result_lines(out, "PASS", "signature")
    bridge = [ln.split()[1] for ln in out.splitlines() if ln.startswith("BRIDGE ")]
    assert len(passed) == 2 and bridge, out
    assert all(ln.split()[2] == "%s:%s" % (bridge[0], FUNCTION) for ln in passed), out


def test_cst_export_keeps_the_resolve_entry(unpacked):
    """container-structure-test export of a GPU gate config runs the same resolution, and it passes on a real wheel."""
    import os
    import subprocess

    from toolkit.gates.cst_export import to_cst

    gates = {"signatures": _gpu_variants()[DEFAULT].gates["signatures"]}
    test = to_cst(gates, sys.executable)["commandTests"][0]
    assert json.loads(test["args"][2]) == {
        "signatures": [{"resolve": "sglang_attn_bridge.sglang_api:EXTEND_ATTENTION", "import": False}]
    }
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(unpacked("0.5.16")), str(BRIDGE_SRC)]))
    run = subprocess.run(
        [test["command"], *test["args"]], capture_output=True, text=True, env=env, cwd="/", timeout=300
    )
    assert run.returncode == test["exitCode"] and re.search(test["expectedOutput"][0], run.stdout), run.stdout
    assert NEW_MODULE in run.stdout
