"""The gate runner against throwaway packages on PYTHONPATH, run as `python -m verify` in a subprocess."""

import os
import subprocess
import sys

import pytest

SGLANG_0_5_5 = """
def extend_attention_fwd_unified(q, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, prefix_lens,
                                 max_len_extend, custom_mask=None, mask_indptr=None, sm_scale=None, logit_cap=0.0,
                                 is_causal=True, sliding_window_size=-1, sinks=None, window_start_pos=None,
                                 xai_temperature_len=-1):
    return o
"""
SGLANG_0_5_10 = SGLANG_0_5_5.replace("v_buffer, qo_indptr", "v_buffer, k_scale, v_scale, qo_indptr")
OLD_CALL = "q,o,k_buffer,v_buffer,qo_indptr,kv_indptr,kv_indices,prefix_lens,max_len_extend,sm_scale"
NEW_CALL = OLD_CALL + ",k_scale,v_scale"
KERNEL = "fakesgl.srt.layers.attention.triton_ops.extend_attention"


def test_missing_module_fails_naming_it(run_verify, lines):
    proc = run_verify("--import", "json", "--import", "no_such_module_xyz")
    assert proc.returncode == 1
    (fail,) = lines(proc, "FAIL", "import")
    assert "no_such_module_xyz" in fail and "ModuleNotFoundError" in fail
    assert lines(proc, "PASS", "import")[0].split()[2] == "json"
    assert proc.stdout.strip().splitlines()[-1] == "1 passed, 1 failed"


def test_missing_dependency_names_the_importing_line(tmp_path, run_verify, write_tree, lines):
    write_tree(tmp_path, {"needsdep/__init__.py": "import os\nimport not_installed_dep_xyz\n"})
    proc = run_verify("--import", "needsdep", pythonpath=[tmp_path])
    assert proc.returncode == 1
    (fail,) = lines(proc, "FAIL")
    assert "not_installed_dep_xyz" in fail
    assert "%s:2" % (tmp_path / "needsdep" / "__init__.py") in fail


def test_long_message_keeps_the_location(tmp_path, run_verify, write_tree, lines):
    write_tree(tmp_path, {"noisy/__init__.py": "x = 1\nraise ImportError('libfoo.so: ' + 'x' * 2000)\n"})
    proc = run_verify("--import", "noisy", pythonpath=[tmp_path])
    (fail,) = lines(proc, "FAIL")
    assert "ImportError: libfoo.so: xxx" in fail
    assert "... at %s:2  (" % (tmp_path / "noisy" / "__init__.py") in fail
    assert len(fail) < 400


def test_lazy_submodule_syntax_error_passes_import_fails_compile(tmp_path, run_verify, write_tree, lines):
    write_tree(
        tmp_path,
        {
            "lazypkg/__init__.py": """
            import os
            open(os.environ["SENTINEL"], "w").close()  # proves whether the package code ran
            def load():
                from . import kernels
                return kernels
            """,
            "lazypkg/kernels/__init__.py": "",
            "lazypkg/kernels/attn.py": """
            class Bridge:
                def forward(self):
                    if True:
                        x = 1
                def restart(self):
                    return 2

                        y = 3
            """,
        },
    )
    sentinel = tmp_path / "imported"
    proc = run_verify("--compile", "lazypkg", pythonpath=[tmp_path], env={"SENTINEL": str(sentinel)})
    assert proc.returncode == 1, proc.stdout
    (fail,) = lines(proc, "FAIL", "compile")
    assert "%s:9" % (tmp_path / "lazypkg" / "kernels" / "attn.py") in fail
    assert "IndentationError" in fail and "1 of 3 files failed" in fail
    assert not sentinel.exists(), "--compile must locate the package without executing it"
    assert not list(tmp_path.rglob("__pycache__")) and not list(tmp_path.rglob("*.pyc")), "no .pyc may be written"

    proc = run_verify("--import", "lazypkg", pythonpath=[tmp_path], env={"SENTINEL": str(sentinel)})
    assert proc.returncode == 0, proc.stdout  # the incident: the start-up import alone does not see it
    assert sentinel.exists()


def test_compile_directory_and_counts(tmp_path, run_verify, write_tree, lines):
    write_tree(tmp_path, {"tree/a.py": "x = 1\n", "tree/sub/b.py": "y = 2\n", "tree/notes.txt": "def (\n"})
    proc = run_verify("--compile", tmp_path / "tree")
    assert proc.returncode == 0, proc.stdout
    assert "2 files compiled" in lines(proc, "PASS", "compile")[0]
    (tmp_path / "tree" / "sub" / "c.py").write_text("def f(:\n    pass\n")
    proc = run_verify("--compile", tmp_path / "tree")
    assert proc.returncode == 1
    assert "%s:1" % (tmp_path / "tree" / "sub" / "c.py") in lines(proc, "FAIL", "compile")[0]


def test_compile_unknown_target_fails(tmp_path, run_verify, lines):
    proc = run_verify("--compile", "no_such_pkg_xyz", "--compile", tmp_path / "missing")
    assert proc.returncode == 1
    fails = lines(proc, "FAIL", "compile")
    assert len(fails) == 2 and "not found" in fails[0] and "no such directory" in fails[1]


@pytest.mark.parametrize("mode", ["--signature", "--signature-source"])
def test_signature_drift_k_scale_v_scale(tmp_path, run_verify, write_tree, lines, mode):
    files = {
        "fakesgl/__init__.py": "",
        "fakesgl/srt/__init__.py": "",
        "fakesgl/srt/layers/__init__.py": "",
        "fakesgl/srt/layers/attention/__init__.py": "",
        "fakesgl/srt/layers/attention/triton_ops/__init__.py": "",
        "fakesgl/srt/layers/attention/triton_ops/extend_attention.py": SGLANG_0_5_10,
    }
    write_tree(tmp_path, files)
    proc = run_verify(mode, "%s:extend_attention_fwd_unified=%s" % (KERNEL, OLD_CALL), pythonpath=[tmp_path])
    assert proc.returncode == 1
    (fail,) = lines(proc, "FAIL", "signature")
    assert "missing a required argument: 'k_scale'" in fail
    proc = run_verify(mode, "%s:extend_attention_fwd_unified=%s" % (KERNEL, NEW_CALL), pythonpath=[tmp_path])
    assert proc.returncode == 0, proc.stdout
    proc = run_verify(mode, "%s:extend_attention_fwd_unified=%s,page_size" % (KERNEL, NEW_CALL), pythonpath=[tmp_path])
    assert proc.returncode == 1
    assert "unexpected keyword argument 'page_size'" in lines(proc, "FAIL")[0]


def test_signature_source_mode_never_imports(tmp_path, run_verify, write_tree, lines):
    write_tree(
        tmp_path,
        {
            "heavy/__init__.py": "raise RuntimeError('heavy deps: importing this package is forbidden in the test')\n",
            "heavy/ops/__init__.py": "from .kernel import fwd as fwd_alias\n",
            "heavy/ops/kernel.py": SGLANG_0_5_5.replace("extend_attention_fwd_unified", "fwd"),
        },
    )
    target = "heavy.ops.kernel:fwd=" + OLD_CALL
    proc = run_verify(
        "--signature-source", target, "--signature-source", "heavy.ops:fwd_alias=" + OLD_CALL, pythonpath=[tmp_path]
    )
    assert proc.returncode == 0, proc.stdout
    assert "kernel.py" in lines(proc, "PASS")[1]  # the re-export was followed to its def
    proc = run_verify("--signature", target, pythonpath=[tmp_path])
    assert proc.returncode == 1
    assert "RuntimeError: heavy deps" in lines(proc, "FAIL")[0]


def test_signature_existence_and_callable(tmp_path, run_verify, write_tree, lines):
    write_tree(
        tmp_path,
        {
            "sigmod.py": """
        LIMIT = 3
        class Box:
            def __init__(self, size, *, color="red"):
                self.size = size
            def resize(self, size):
                return size
        def plain(a, b=1):
            return a
        """
        },
    )
    ok = ["sigmod:plain", "sigmod:plain=a", "sigmod:Box=size,color", "sigmod:Box.resize=size"]
    for mode in ("--signature", "--signature-source"):
        args = [x for t in ok for x in (mode, t)]
        proc = run_verify(*args, pythonpath=[tmp_path])
        assert proc.returncode == 0, (mode, proc.stdout)
        proc = run_verify(mode, "sigmod:missing_fn", mode, "sigmod:Box.resize=self,size", pythonpath=[tmp_path])
        assert proc.returncode == 1
        fails = lines(proc, "FAIL")
        assert len(fails) == 2 and "missing_fn" in fails[0] and "'self'" in fails[1]
    proc = run_verify("--signature", "sigmod:LIMIT", pythonpath=[tmp_path])
    assert proc.returncode == 1 and "not callable" in lines(proc, "FAIL")[0]


def _venv(tmp_path):
    """A real venv (no pip: fast) whose site-packages is the image's 'site-packages'."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout.strip()
    return python, site


def test_provenance_shadowing_checkout(tmp_path, run_verify, write_tree, lines):
    python, site = _venv(tmp_path)
    write_tree(site, {"bridgepkg/__init__.py": "ORIGIN = 'image'\n"})
    write_tree(tmp_path / "checkout", {"bridgepkg/__init__.py": "ORIGIN = 'checkout'\n"})
    proc = run_verify("--provenance", "bridgepkg=site-packages", python=python)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_verify("--provenance", "bridgepkg=site-packages", python=python, pythonpath=[tmp_path / "checkout"])
    assert proc.returncode == 1
    (fail,) = lines(proc, "FAIL", "provenance")
    assert os.path.realpath(tmp_path / "checkout" / "bridgepkg") in fail
    assert os.path.realpath(os.path.join(site, "bridgepkg")) in fail and "shadows" in fail
    proc = run_verify(
        "--provenance", "bridgepkg=%s" % (tmp_path / "checkout"), python=python, pythonpath=[tmp_path / "checkout"]
    )
    assert proc.returncode == 0, proc.stdout
    proc = run_verify("--provenance", "absent_pkg_xyz=site-packages", python=python)
    assert proc.returncode == 1 and "not found" in lines(proc, "FAIL")[0]


def _fake_torch(root, write_tree, hip=None, cuda=None):
    write_tree(
        root,
        {
            "torch/__init__.py": "__version__ = '2.9.0+fake'\nfrom . import version\n",
            "torch/version.py": "hip = %r\ncuda = %r\n" % (hip, cuda),
        },
    )


def _dist_info(root, name, version, requires=()):
    d = root / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    d.mkdir(parents=True)
    meta = ["Metadata-Version: 2.1", "Name: %s" % name, "Version: %s" % version]
    meta += ["Requires-Dist: %s" % r for r in requires]
    (d / "METADATA").write_text("\n".join(meta) + "\n")
    return d


def test_platform_rocm_cuda_cpu(tmp_path, run_verify, write_tree, lines):
    rocm, cuda = tmp_path / "rocm", tmp_path / "cuda"
    _fake_torch(rocm, write_tree, hip="7.0.51831")
    _fake_torch(cuda, write_tree, cuda="12.9")
    assert run_verify("--platform", "rocm", pythonpath=[rocm]).returncode == 0
    assert run_verify("--platform", "cuda", pythonpath=[cuda]).returncode == 0
    proc = run_verify("--platform", "cuda", pythonpath=[rocm])
    assert proc.returncode == 1 and "torch.version.cuda is not set" in lines(proc, "FAIL")[0]
    proc = run_verify("--platform", "rocm", pythonpath=[cuda])
    assert proc.returncode == 1 and "torch.version.hip is not set" in lines(proc, "FAIL")[0]
    proc = run_verify("--platform", "cpu", pythonpath=[cuda])
    assert proc.returncode == 0 and "torch 2.9.0+fake hip=None cuda=12.9" in lines(proc, "PASS")[0]
    _dist_info(rocm, "nvidia-cublas-cu12", "12.4.5.8")
    proc = run_verify("--platform", "rocm", pythonpath=[rocm])
    assert proc.returncode == 1
    assert "CUDA wheels installed: nvidia-cublas-cu12" in lines(proc, "FAIL", "platform")[0]


def test_platform_without_torch(tmp_path, run_verify, write_tree, lines):
    write_tree(tmp_path, {"torch/__init__.py": "raise ImportError('libtorch_hip.so: cannot open shared object')\n"})
    proc = run_verify("--platform", "rocm", pythonpath=[tmp_path])
    assert proc.returncode == 1 and "libtorch_hip.so" in lines(proc, "FAIL")[0]
    proc = run_verify("--platform", "cpu", pythonpath=[tmp_path])
    assert proc.returncode == 0 and "torch not importable" in lines(proc, "PASS")[0]


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory):
    """A venv with pip (ensurepip, offline) and nothing else: its pip check is clean whatever the host has."""
    venv = tmp_path_factory.mktemp("pipvenv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv / "bin" / "python"


def test_pip_check_allowed_and_not(tmp_path, run_verify, lines, pip_venv):
    _dist_info(tmp_path, "fakeneedy", "1.0", requires=["nosuchdep-xyz>=2"])
    clean = run_verify("--pip-check", python=pip_venv)
    assert clean.returncode == 0, clean.stdout
    assert "No broken requirements found." in lines(clean, "PASS", "pip-check")[0]
    proc = run_verify("--pip-check", pythonpath=[tmp_path], python=pip_venv)
    assert proc.returncode == 1
    (fail,) = lines(proc, "FAIL", "pip-check")
    assert "fakeneedy 1.0 requires nosuchdep-xyz" in fail and fail.split()[2] == "fakeneedy"
    cfg = tmp_path / "gates.json"
    cfg.write_text(
        '{"pip_check": {"allow": [{"distribution": "fakeneedy", "requirement": "nosuchdep-xyz", '
        '"reason": "optional extra, never imported"}]}}'
    )
    proc = run_verify("--config", cfg, pythonpath=[tmp_path], python=pip_venv)
    assert proc.returncode == 0, proc.stdout
    (ok,) = lines(proc, "PASS", "pip-check")
    assert "allowed (optional extra, never imported)" in ok
    assert proc.stdout.strip().splitlines()[-1] == "1 passed, 0 failed (1 allowed)"


def test_verbose_lists_each_allowed_line_with_its_rule_and_reason(tmp_path, run_verify, pip_venv):
    """Counted is listed: `--verbose` prints every allowed pip-check line with the rule and the rule's reason; the
    JSON and JUnit reports always hold them; the summary names the JSON report written."""
    import json
    import xml.etree.ElementTree as ET

    _dist_info(tmp_path, "fakeneedy", "1.0", requires=["nosuchdep-xyz>=2", "otherdep-xyz"])
    cfg = tmp_path / "gates.json"
    rules = [
        {"distribution": "fakeneedy", "requirement": "nosuchdep-xyz", "reason": "optional extra, never imported"},
        {"distribution": "fakeneedy", "requirements": ["otherdep-xyz", "third-xyz"], "reason": "a plugin nobody loads"},
    ]
    cfg.write_text(json.dumps({"pip_check": {"allow": rules}}))
    report, xml = tmp_path / "out" / "report.json", tmp_path / "report.xml"
    report.parent.mkdir()
    args = ("--config", cfg, "--json", report, "--junit", xml)
    quiet = run_verify(*args, pythonpath=[tmp_path], python=pip_venv)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "ALLOWED" not in quiet.stdout
    assert quiet.stdout.strip().splitlines()[-1] == "2 passed, 0 failed (2 allowed); report: %s" % report
    proc = run_verify(*args, "--verbose", pythonpath=[tmp_path], python=pip_venv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = [ln for ln in proc.stdout.splitlines() if ln.startswith("ALLOWED")]
    assert listed == [
        "ALLOWED  pip-check  fakeneedy 1.0 requires nosuchdep-xyz, which is not installed.  "
        "(rule pip_check.allow[0]: fakeneedy -> nosuchdep-xyz; reason: optional extra, never imported)",
        "ALLOWED  pip-check  fakeneedy 1.0 requires otherdep-xyz, which is not installed.  "
        "(rule pip_check.allow[1]: fakeneedy -> otherdep-xyz, third-xyz; reason: a plugin nobody loads)",
    ]
    assert proc.stdout.strip().splitlines()[-1] == "2 passed, 0 failed (2 allowed); report: %s" % report
    checks = json.loads(report.read_text())["checks"]
    assert [c["allowed_by"] for c in checks] == [
        {"line": "fakeneedy 1.0 requires nosuchdep-xyz, which is not installed.", "rule": rules[0],
         "config": "pip_check.allow[0]", "reason": rules[0]["reason"]},
        {"line": "fakeneedy 1.0 requires otherdep-xyz, which is not installed.", "rule": rules[1],
         "config": "pip_check.allow[1]", "reason": rules[1]["reason"]},
    ]  # fmt: skip
    props = [
        {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(xml).getroot().iter("testcase")
    ]
    assert [p["allowed.reason"] for p in props] == [rules[0]["reason"], rules[1]["reason"]]
    assert props[1]["allowed.line"] == "fakeneedy 1.0 requires otherdep-xyz, which is not installed."
    assert json.loads(props[0]["allowed.rule"]) == rules[0]


def test_commands_and_check_order(bundle, tmp_path, run_verify, write_tree, lines, pip_venv):
    write_tree(tmp_path, {"orderpkg/__init__.py": "def f(a):\n    return a\n"})
    cfg = tmp_path / "gates.json"
    cfg.write_text(
        """{
      "commands": [{"name": "doctor-ok", "argv": ["{python}", "%(say)s", "resolved triton kernels"]},
                   {"name": "doctor-bad", "argv": ["{python}", "%(say)s", "--exit", "3", "one", "no kernel"]}],
      "pip_check": {},
      "platform": "cpu",
      "signatures": [{"target": "orderpkg:f", "keywords": ["a"], "import": false}],
      "imports": ["orderpkg"],
      "compile": ["orderpkg"],
      "provenance": {"orderpkg": "%(tmp)s"}
    }"""
        % {"tmp": tmp_path, "say": "probes/say.py"}
    )
    proc = run_verify("--config", cfg, pythonpath=[tmp_path], python=pip_venv, cwd=bundle)
    assert proc.returncode == 1
    kinds = [ln.split()[1] for ln in lines(proc)]
    assert kinds == ["provenance", "compile", "import", "signature", "platform", "pip-check", "command", "command"]
    fails = lines(proc, "FAIL")
    assert len(fails) == 1 and "doctor-bad" in fails[0] and "exit 3: no kernel" in fails[0]
    assert "resolved triton kernels" in lines(proc, "PASS", "command")[0]


def test_cli_flags_add_to_config(tmp_path, run_verify, lines):
    cfg = tmp_path / "gates.json"
    cfg.write_text('{"imports": ["json"]}')
    proc = run_verify("--config", cfg, "--import", "csv", "--compile", tmp_path)
    targets = [ln.split()[2] for ln in lines(proc)]
    assert targets == [str(tmp_path), "json", "csv"]


def test_runs_on_python_3_9_when_present(tmp_path, run_verify, lines):
    py39 = "/root/.pyenv/versions/3.9.18/bin/python3.9"
    if not os.path.exists(py39):
        pytest.skip("no Python 3.9 interpreter on this machine")
    proc = run_verify(
        "--import",
        "json",
        "--compile",
        "json",
        "--signature-source",
        "json:dumps=obj,indent",
        "--platform",
        "cpu",
        python=py39,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(lines(proc, "PASS")) == 4
