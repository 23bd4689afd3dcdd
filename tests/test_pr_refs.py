"""Pull request body directives (`ci-sglang-pr:`, `ci-megatron-pr:`) as data: what is accepted, what is refused,
and, against a real git server on 127.0.0.1, the resolved commit reaching the bake file as a `--ref` override."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from local_servers import GitServer, env_for
from support import ROOT, git, run_build_py

from ci.pr_refs import parse_body
from toolkit.errors import UsageError

C = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    "body, wanted",
    [
        ("", {}),
        ("Fixes the bridge.\n\nci-sglang-pr: #12345\n", {"sglang_miles": "refs/pull/12345/head"}),
        (
            f"ci-megatron-pr: my-fix-branch\r\nci-sglang-pr: {C}\r\n",
            {"megatron_lm": "my-fix-branch", "sglang_miles": C},
        ),
        ("ci-sglang-pr:\tv0.5.16  \n", {"sglang_miles": "v0.5.16"}),
        ("  ci-sglang-pr: x\n> ci-sglang-pr: y\nci-image-tag: dev\n", {}),  # only whole lines, only our directives
    ],
)
def test_directives_accepted(body, wanted):
    assert parse_body(body) == wanted


@pytest.mark.parametrize(
    "value",
    ["x;id", "$(id)", "a b", "-upload-pack=x", "a..b", "#0", "#12x", "refs/heads/.x", "`id`", "x\\y", "a.lock", ""],
)
def test_values_that_are_not_a_commit_a_pull_or_a_ref_name_are_refused(value):
    with pytest.raises(UsageError, match="pull request body, ci-sglang-pr: not a ref name"):
        parse_body(f"ci-sglang-pr: {value}\n")


def test_two_different_values_for_one_directive_are_refused():
    with pytest.raises(UsageError, match="given twice"):
        parse_body("ci-sglang-pr: a\nci-sglang-pr: b\n")


def test_pr_refs_resolve_on_the_server_and_reach_the_bake_file(project_copy, tmp_path):
    g = GitServer(tmp_path / "git")
    try:
        sgl = g.create("sgl-project/sglang")
        locked = g.commit("sgl-project/sglang", {"python/x.py": "X = 1\n"})
        feature = g.commit("sgl-project/sglang", {"python/x.py": "X = 2\n"}, branch="feature")
        meg = g.create("radixark/Megatron-LM")
        g.commit("radixark/Megatron-LM", {"m.py": "M = 1\n"})
        pull = g.commit("radixark/Megatron-LM", {"m.py": "M = 2\n"}, branch="wip")
        work = g.root.parent / "work" / "radixark/Megatron-LM"
        git(work, "push", "-q", "origin", "HEAD:refs/pull/7/head")
        git(g.root / "radixark/Megatron-LM.git", "update-server-info")
        spec = (ROOT / "tests" / "unit" / "conftest.py").read_text()
        demo = spec[spec.index('DEMO = f"""\\\n') + len('DEMO = f"""\\\n') : spec.index('"""\n\n\n@pytest.fixture')]
        demo = demo.replace("{{", "{").replace("}}", "}").replace("family: demo", "family: prref")
        demo = demo.replace("alias: dm\n", "").replace("  a: {}", "  prref-a: {}").replace("  b:\n", "  prref-b:\n")
        demo = demo.replace("default: a", "default: prref-a").replace("tag_suffix: bee", "tag_suffix: prref-b")
        demo = demo.replace(
            "  lib: {git: https://example.com/org/lib.git, ref: {COMMIT}}",
            f"  sglang_miles: {{git: {sgl}, track: {{branch: main}}}}\n"
            f"  megatron_lm: {{git: {meg}, track: {{branch: main}}}}",
        )
        demo = demo.replace("{source: lib}", "{source: sglang_miles}, {source: megatron_lm}")
        for other in (project_copy / "images").glob("*.yaml"):
            other.unlink()  # the project's GPU families name GitHub's Megatron-LM: this one names the local server's
        (project_copy / "images" / "prref.yaml").write_text(demo)
        shutil.copytree(ROOT / "ci", project_copy / "ci", ignore=shutil.ignore_patterns("__pycache__"))
        env = env_for()
        assert run_build_py("lock", "--family", "prref", cwd=project_copy, env=env).returncode == 0
        env["PR_BODY"] = "Try the fix.\nci-sglang-pr: feature\nci-megatron-pr: #7\n"
        args = tmp_path / "pr-refs.args"
        proc = subprocess.run(
            [sys.executable, "-m", "ci.pr_refs", "--args", str(args)],
            cwd=project_copy,
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        lines = args.read_text().splitlines()
        assert lines == [
            "--target=prref-a",
            "--target=prref-b",
            f"--ref=megatron_lm={pull}",
            f"--ref=sglang_miles={feature}",
        ]
        bake = run_build_py("bake", *lines, "-o", str(tmp_path / "bake.json"), cwd=project_copy, env=env)
        assert bake.returncode == 0, bake.stderr
        target = json.loads((tmp_path / "bake.json").read_text())["target"]["prref-a"]
        assert target["contexts"] == {"src-megatron_lm": f"{meg}#{pull}", "src-sglang_miles": f"{sgl}#{feature}"}
        assert target["labels"]["io.miles.source.sglang_miles"] == f"{sgl}#{feature}" != f"{sgl}#{locked}"
        env["PR_BODY"] = "ci-sglang-pr: no-such-branch\n"
        proc = subprocess.run(
            [sys.executable, "-m", "ci.pr_refs"], cwd=project_copy, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no ref 'no-such-branch'" in proc.stderr
    finally:
        g.stop()
