"""The overlay guard on patches made by real git and real diff -u (plus hand-edited ones)."""

import os
import subprocess
import sys

import pytest
from support import ROOT, git, git_init

from overlay_guard import lint_patch_text, lint_paths

BASE = "".join("line %d\n" % i for i in range(1, 21))


@pytest.fixture
def repo(tmp_path):
    r = git_init(tmp_path / "repo")
    (r / "src").mkdir()
    (r / "src" / "a.txt").write_text(BASE)
    (r / "run.sh").write_text("echo hi\n")
    git(r, "add", ".")
    git(r, "commit", "-qm", "A")
    return r


def rules(findings):
    return [f.rule for f in findings]


def insert_after(text, n, new):
    lines = text.splitlines(keepends=True)
    return "".join(lines[:n] + [new] + lines[n:])


def test_zero_context_insertion_from_git_diff_U0(repo):
    (repo / "src" / "a.txt").write_text(insert_after(BASE, 10, "inserted\n"))
    patch = git(repo, "diff", "-U0").stdout
    (finding,) = lint_patch_text(patch, "zero.patch")
    assert finding.rule == "zero-context" and finding.hunk == 1
    assert "pure insertion @@ -10,0 +11 @@" in finding.message and "src/a.txt" in finding.message
    assert str(finding).startswith("zero.patch:1(5) zero-context: ")

    assert lint_patch_text(git(repo, "diff").stdout, "full.patch") == []  # default -U3 is clean


def test_zero_context_replacement_and_second_hunk_numbering(repo):
    text = BASE.replace("line 3\n", "line three\n").replace("line 15\n", "line fifteen\n")
    (repo / "src" / "a.txt").write_text(text)
    findings = lint_patch_text(git(repo, "diff", "-U0").stdout, "p.patch")
    assert rules(findings) == ["zero-context", "zero-context"]
    assert [f.hunk for f in findings] == [1, 2]
    assert "no context lines" in findings[1].message


def test_new_and_deleted_files_are_not_zero_context(repo):
    (repo / "src" / "new.txt").write_text("fresh\n")
    os.remove(repo / "run.sh")
    git(repo, "add", "-A")
    assert lint_patch_text(git(repo, "diff", "--cached", "-U0").stdout, "p.patch") == []


def test_plain_diff_u(tmp_path):
    (tmp_path / "orig").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "orig" / "f.py").write_text(BASE)
    (tmp_path / "new" / "f.py").write_text(insert_after(BASE, 5, "x\n"))

    def diff(*opts):
        return subprocess.run(
            ["diff", *opts, "orig/f.py", "new/f.py"], cwd=tmp_path, stdout=subprocess.PIPE, text=True
        ).stdout

    assert lint_patch_text(diff("-u"), "plain.diff") == []
    (finding,) = lint_patch_text(diff("-U0"), "plain0.diff")
    assert finding.rule == "zero-context" and "f.py" in finding.message


def test_format_patch_with_signature_is_parsed(repo):
    (repo / "src" / "a.txt").write_text(insert_after(BASE, 2, "two and a half\n"))
    git(repo, "commit", "-qam", "B\n\n--- not a header\n")
    patch = git(repo, "format-patch", "-1", "--stdout").stdout
    assert "\n-- \n" in patch
    assert lint_patch_text(patch, "0001.patch") == []
    zero = git(repo, "format-patch", "-1", "--stdout", "-U0").stdout
    assert rules(lint_patch_text(zero, "0001.patch")) == ["zero-context"]


@pytest.mark.parametrize(
    "edit,expect",
    [
        (lambda p: p.replace("@@ -8,6 +8,7 @@", "@@ -8,6 +8,9 @@"), "announces -6/+9 lines but the body has -6/+7"),
        (lambda p: p.replace("@@ -8,6 +8,7 @@", "@@ -8,4 +8,5 @@"), "surplus"),
        (lambda p: p.replace(" line 13\n", ""), "announces -6/+7 lines but the body has -5/+6"),
    ],
)
def test_hunk_counts_that_disagree(repo, edit, expect):
    (repo / "src" / "a.txt").write_text(insert_after(BASE, 10, "inserted\n"))
    patch = git(repo, "diff").stdout
    assert "@@ -8,6 +8,7 @@" in patch
    findings = lint_patch_text(edit(patch), "edited.patch")
    assert "hunk-count" in rules(findings)
    assert expect in next(f.message for f in findings if f.rule == "hunk-count")


def test_paths_outside_the_tree(repo):
    (repo / "src" / "a.txt").write_text(insert_after(BASE, 10, "inserted\n"))
    patch = git(repo, "diff").stdout
    assert lint_patch_text(patch, "p", tree_root="src") == []
    (f,) = lint_patch_text(patch, "p", tree_root="megatron")
    assert f.rule == "outside-tree" and "outside the target tree megatron/" in f.message
    escaping = patch.replace("a/src/a.txt", "a/../etc/a.txt").replace("b/src/a.txt", "b/../etc/a.txt")
    assert "leaves the tree through '..'" in lint_patch_text(escaping, "p")[0].message
    absolute = patch.replace("--- a/src/a.txt", "--- /etc/a.txt").replace("+++ b/src/a.txt", "+++ /etc/a.txt")
    assert any("absolute path /etc/a.txt" in f.message for f in lint_patch_text(absolute, "p"))


def test_binary_mode_only_and_symlink(repo):
    (repo / "blob.bin").write_bytes(bytes(range(256)))
    os.chmod(repo / "run.sh", 0o755)
    os.symlink("/etc/passwd", repo / "src" / "link")
    git(repo, "add", "-A")
    findings = lint_patch_text(git(repo, "diff", "--cached", "--binary").stdout, "p.patch")
    assert sorted(rules(findings)) == ["binary", "mode-only", "symlink"]
    assert "100644 -> 100755 for run.sh" in next(f.message for f in findings if f.rule == "mode-only")
    plain_binary = git(repo, "diff", "--cached", "--", "blob.bin").stdout
    assert "Binary files" in plain_binary
    assert rules(lint_patch_text(plain_binary, "p")) == ["binary"]


def test_not_a_diff_and_malformed_header():
    assert rules(lint_patch_text("just prose\n", "x.patch")) == ["not-a-diff"]
    text = "--- a/f\n+++ b/f\n@@ -1,x +1 @@\n-a\n+b\n"
    assert rules(lint_patch_text(text, "x.patch")) == ["malformed"]


def guard(*args):
    """``python3 -m overlay_guard ARGS`` from the repository root, as CI runs it."""
    return subprocess.run(
        [sys.executable, "-m", "overlay_guard", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_cli_and_directory_walk(tmp_path, repo):
    (repo / "src" / "a.txt").write_text(insert_after(BASE, 10, "inserted\n"))
    overlays = tmp_path / "overlays"
    (overlays / "megatron").mkdir(parents=True)
    (overlays / "megatron" / "good.patch").write_text(git(repo, "diff").stdout)
    (overlays / "megatron" / "zero.diff").write_text(git(repo, "diff", "-U0").stdout)
    (overlays / "README.md").write_text("git apply --unidiff-zero is forbidden\n")  # not a scanned type
    proc = guard(overlays)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "%s:1(5) zero-context: pure insertion @@ -10,0 +11 @@ into src/a.txt with no context: git places it by "
        "line number alone (regenerate with context, e.g. git diff -U3)" % (overlays / "megatron" / "zero.diff")
    ]
    os.remove(overlays / "megatron" / "zero.diff")
    assert guard(overlays).returncode == 0
    proc = guard("--tree-root", "megatron", overlays)
    assert proc.returncode == 1 and "outside-tree" in proc.stdout
    proc = guard(tmp_path / "missing")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    assert guard().returncode == 2
    with pytest.raises(FileNotFoundError):
        lint_paths([str(tmp_path / "missing")])
