"""The overlay guard lets through a hunk that empties a whole file (upstream's tile_kernels patch has one), because
git anchors it at both ends; any other context-free hunk is still a finding."""

from overlay_guard import lint_patch_text

WHOLE = "--- a/m/__init__.py\n+++ b/m/__init__.py\n@@ -1,2 +0,0 @@\n-from . import a\n-from . import b\n"
MIDDLE = "--- a/m/__init__.py\n+++ b/m/__init__.py\n@@ -3,2 +2,0 @@\n-from . import a\n-from . import b\n"


def test_whole_file_emptying_hunk_is_not_zero_context():
    assert lint_patch_text(WHOLE, "p.patch") == []


def test_context_free_hunk_elsewhere_is_still_reported():
    assert [f.rule for f in lint_patch_text(MIDDLE, "p.patch")] == ["zero-context"]
