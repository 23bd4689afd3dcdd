"""The overlay guard: patches that could apply to the wrong place, and build steps that could hide it.

``python3 -m overlay_guard [--tree-root PREFIX] PATH...`` prints one finding per line and exits 1 when there is
any (0 clean, 2 bad usage). Patch findings read ``PATCH:HUNK(line) rule: problem`` (HUNK counts hunks over the
whole patch file, line is the @@ header's line) or ``PATCH:line rule: problem`` for a file-level finding; scan
findings read ``FILE:line rule: problem``. Rules for patches:

- ``zero-context``: a hunk with no context line (above all a pure insertion ``@@ -N,0 +M,K @@``): nothing but the
  line number anchors it. File creations and deletions are exempt (their hunks cannot have context), and so is a
  hunk that empties a whole file (``@@ -1,N +0,0 @@``): without --unidiff-zero git anchors a hunk with no context at
  line 1 to the start and, with no trailing context, to the end, so it applies only to exactly those N lines.
- ``hunk-count``: the header's counts disagree with the body (a hand-edited patch).
- ``outside-tree``: an absolute path, a ``..`` component, or (with --tree-root) a path outside that prefix. Paths
  are compared without git's ``a/``/``b/`` prefixes.
- ``binary``, ``mode-only``, ``symlink``: changes a reviewer does not see in the text of the patch.
- ``not-a-diff``, ``malformed``: nothing to apply, or a hunk header that cannot be read.

Patch rules live in ``patch_rules`` (patches are read by ``unified_diff``), build-step rules in ``build_steps``.
Directories are walked (``files``): *.patch and *.diff are patches; Dockerfile*, *.j2, *.sh, *.bash, *.yml, *.yaml,
Makefile and *.mk are scanned. A file named explicitly is read as a patch if it ends in .patch/.diff, else scanned
by its name (unknown names as shell).
"""

from .files import lint_file, lint_paths, lint_step_text
from .patch_rules import Finding, lint_patch_text

__all__ = ["Finding", "lint_file", "lint_patch_text", "lint_paths", "lint_step_text"]
