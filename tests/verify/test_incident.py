"""The upstream incident (docs/architecture.md, "Why gates"), reproduced for real with git, then caught by the
overlay guard and the gate.

Observed with git 2.39.5 on this machine: in the repository that made the patch (the pre-image blob is present),
`git apply --3way --unidiff-zero` does a real three-way merge and puts the method where it belongs. The incident
needs what upstream's build had: a clone WITHOUT the pre-image blob. A `git clone --depth 1` of revision B is such a
clone; there git prints "repository lacks the necessary blob to perform 3-way merge. Falling back to direct
application...", places the zero-context insertion by line number alone, and exits 0.
"""

import ast
import re
import subprocess

import pytest
from support import git, git_init

from overlay_guard import lint_paths

REV_A = """\
class Engine:
    def start(self):
        self.running = True
        return self

    def stop(self):
        self.running = False
        return self


class Helper:
    def assist(self, x):
        y = x + 1
        return y * 2
"""
RESTART = """\
    def restart(self):
        self.stop()
        return self.start()

"""
# Revision B: start() grew a nested block, so old line 5 (where the insertion goes) is now inside it.
REV_B = REV_A.replace(
    "        self.running = True\n        return self\n",
    "        self.running = True\n        if self.verbose:\n            self.log('start')\n"
    "            self.log('really')\n        return self\n",
    1,
)
# A harmless drift: only Helper changed; a context patch must still land in Engine.
REV_B_BENIGN = REV_A.replace("        return y * 2\n", "        z = y * 2\n        return z\n")
# The line-drift only: two lines added above, nothing the patch's context mentions changed.
REV_B_SHIFT = "import os\nimport sys\n" + REV_A


def sh(args, cwd, check=True):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=check)


def compiles(path):
    try:
        compile(path.read_text(), str(path), "exec")
        return None
    except SyntaxError as exc:
        return exc


def engine_methods(path):
    tree = ast.parse(path.read_text())
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    return [n.name for n in engine.body if isinstance(n, ast.FunctionDef)]


@pytest.fixture
def upstream(tmp_path):
    """Repo with A, the patches for 'insert restart()' made at A, and B committed on top."""
    repo = git_init(tmp_path / "upstream")
    (repo / "mod.py").write_text(REV_A)
    git(repo, "add", "mod.py")
    git(repo, "commit", "-qm", "A")
    (repo / "mod.py").write_text(
        REV_A.replace("        return self\n\n    def stop", "        return self\n\n" + RESTART + "    def stop", 1)
    )
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "zero.patch").write_text(git(repo, "diff", "-U0").stdout)
    (patches / "full.patch").write_text(git(repo, "diff").stdout)
    git(repo, "checkout", "-q", "mod.py")
    assert "@@ -5,0 +6,4 @@" in (patches / "zero.patch").read_text()  # a pure insertion, no context
    return repo, patches


def drift(repo, text, message):
    (repo / "mod.py").write_text(text)
    git(repo, "commit", "-qam", message)


def shallow_clone(repo, dest):
    sh(["git", "clone", "-q", "--depth", "1", "file://%s" % repo, str(dest)], cwd=repo.parent)
    return dest


def test_incident_reproduced_and_caught(upstream, tmp_path, run_verify):
    repo, patches = upstream
    zero = patches / "zero.patch"
    drift(repo, REV_B, "B: start() grows a nested block")

    # 1. With the pre-image blob present, --3way is a real merge and lands correctly (observed, git 2.39).
    applied = git(repo, "apply", "--3way", "--unidiff-zero", str(zero))
    assert applied.returncode == 0 and compiles(repo / "mod.py") is None
    assert engine_methods(repo / "mod.py") == ["start", "restart", "stop"]

    # 2. The build's clone lacks that blob: git falls back to the line number and still exits 0.
    clone = shallow_clone(repo, tmp_path / "build-clone")
    preimage = re.search(r"^index ([0-9a-f]+)\.\.", zero.read_text(), re.M).group(1)
    assert git(clone, "cat-file", "-e", preimage, check=False).returncode != 0, "the clone must lack the blob"
    applied = git(clone, "apply", "--3way", "--unidiff-zero", str(zero), check=False)
    assert applied.returncode == 0, applied.stderr
    assert "lacks the necessary blob" in applied.stderr and "Falling back to direct application" in applied.stderr
    error = compiles(clone / "mod.py")
    assert isinstance(error, IndentationError), (clone / "mod.py").read_text()

    # 3. The overlay guard rejects the patch and names the hunk.
    findings = lint_paths([str(patches)])
    assert [(f.path, f.hunk, f.rule) for f in findings] == [(str(zero), 1, "zero-context")]
    assert str(findings[0]).startswith("%s:1(5) zero-context: pure insertion @@ -5,0 +6,4 @@ into mod.py" % zero)
    proc = run_verify(patches, module="overlay_guard")
    assert proc.returncode == 1 and "%s:1(5) zero-context" % zero in proc.stdout

    # 4. The compile gate rejects the corrupted tree and names file:line.
    proc = run_verify("--compile", clone)
    assert proc.returncode == 1
    assert "%s:%d: IndentationError" % (clone / "mod.py", error.lineno) in proc.stdout


# The template's patch step (toolkit/steps/base.py, patch_line): check, apply with full context, reverse-check.
STEP = "git apply --check {p} && git apply {p} && git apply --reverse --check {p}"


@pytest.mark.parametrize(
    "text,lands",
    [(REV_B, False), (REV_B_BENIGN, True), (REV_B_SHIFT, True)],
    ids=["drift-into-method", "drift-elsewhere", "lines-shifted"],
)
def test_context_patch_lands_right_or_fails(upstream, tmp_path, text, lands):
    repo, patches = upstream
    drift(repo, text, "B")
    clone = shallow_clone(repo, tmp_path / "build-clone")
    before = (clone / "mod.py").read_text()
    step = sh(["sh", "-ec", STEP.format(p=patches / "full.patch")], cwd=clone, check=False)
    if step.returncode == 0:
        assert compiles(clone / "mod.py") is None
        assert engine_methods(clone / "mod.py") == ["start", "restart", "stop"]
        assert "def restart" not in (clone / "mod.py").read_text().split("class Helper")[1]
    else:
        assert "patch does not apply" in step.stderr
        assert (clone / "mod.py").read_text() == before, "a failed --check must leave the tree untouched"
    assert (step.returncode == 0) == lands, step.stderr
