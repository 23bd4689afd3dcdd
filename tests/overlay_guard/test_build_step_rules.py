"""The overlay guard's scan of build steps: Dockerfiles, Jinja2 templates, shell, Makefiles, YAML."""

import textwrap

import pytest

from overlay_guard import lint_paths, lint_step_text

SHA = "7f0fb3456f8ffe47599b5fd167b454605d85f932"


def scan(text, name="Dockerfile"):
    return [(f.line, f.rule) for f in lint_step_text(textwrap.dedent(text).lstrip("\n"), name)]


def test_the_upstream_step_is_rejected_on_every_count():
    found = scan("""
        FROM base
        RUN cd /sgl-workspace/miles && git apply --3way --unidiff-zero /tmp/bridge.patch || true
        """)
    assert found == [(2, "unidiff-zero"), (2, "3way-unpinned"), (2, "apply-no-check"), (2, "or-true")]


def test_safe_step_is_clean():
    assert (
        scan(
            """
        ARG MEGATRON_REF=%s
        RUN git clone https://example.invalid/megatron /opt/megatron \\
         && cd /opt/megatron && git checkout ${MEGATRON_REF} \\
         && git apply --check /patches/megatron.patch \\
         && git apply --3way /patches/megatron.patch \\
         && git apply -R --check /patches/megatron.patch
        # patch -p1 < x.patch || true   (comments are not steps)
        RUN patch -p1 --dry-run -i /patches/te.patch && patch -p1 -i /patches/te.patch
        """
            % SHA
        )
        == []
    )


@pytest.mark.parametrize(
    "ref,pinned",
    [
        (SHA, True),
        ("v0.5.10", False),
        ("main", False),
        ("${REF}", False),
        (SHA[:12], False),
    ],
)
def test_3way_needs_a_pinned_base(ref, pinned):
    found = scan(
        """
        RUN git -C /opt/m checkout %s
        RUN git apply --check p.patch && git -C /opt/m apply -3 p.patch
        """
        % ref
    )
    assert (found == []) == pinned, found


def test_3way_pinned_through_a_variable_or_a_template_expression():
    assert scan("RUN REF=%s; git checkout $REF && git apply --check p && git apply --3way p\n" % SHA, "build.sh") == []
    assert scan(
        "REF=main\nREF2=%s\ngit checkout $REF\ngit apply --check p\ngit apply --3way p\n" % SHA, "build.sh"
    ) == [(5, "3way-unpinned")]
    template = """
        {# the ref comes from the spec; the rendered Dockerfile is checked again with its value #}
        {% for p in patches %}
        RUN cd {{ p.tree }} && git checkout {{ p.ref }} \\
         && git apply --check {{ p.file }} && git apply --3way {{ p.file }}
        {% endfor %}
        """
    assert scan(template, "rocm.Dockerfile.j2") == []
    assert scan(template.replace("{{ p.ref }}", "main"), "rocm.Dockerfile.j2") == [(3, "3way-unpinned")]


def test_patch_needs_a_dry_run_of_the_same_input():
    assert scan("RUN patch -p1 < a.patch\n") == [(1, "patch-no-dry-run")]
    assert scan("RUN patch -p1 --dry-run < a.patch && patch -p1 < a.patch\n") == []
    assert scan("RUN patch --dry-run -p1 -i a.patch\nRUN patch -p1 -i b.patch\n") == [(2, "patch-no-dry-run")]
    assert scan("RUN patch -p1 < b.patch\nRUN patch --dry-run -p1 < b.patch\n") == [(1, "patch-no-dry-run")]
    assert scan("RUN apt-get install -y patch && cp x.patch /tmp/\n") == []


def test_git_apply_needs_a_check_first():
    assert scan("RUN git apply a.patch\n") == [(1, "apply-no-check")]
    assert scan("RUN git apply --check a.patch && git apply a.patch\n") == []
    assert scan("RUN git apply --check a.patch && git apply b.patch\n") == [(1, "apply-no-check")]


@pytest.mark.parametrize("tail", ["|| true", "|| :", "|| exit 0", "|| /bin/true"])
def test_or_true_after_a_patch_step(tail):
    line = "RUN patch --dry-run -i a.patch && patch -i a.patch %s\n" % tail
    assert scan(line) == [(1, "or-true"), (1, "or-true")]  # it masks the dry run and the apply alike
    assert scan("RUN (git apply --check a.patch && git apply a.patch) %s\n" % tail) == [(1, "or-true")] * 2
    assert scan("RUN git apply --check a.patch && git apply a.patch; rm -f junk %s\n" % tail) == []


def test_shell_script_continuations_and_comments():
    text = """
        #!/bin/sh
        set -eu
        # git apply --unidiff-zero x.patch  <- prose in a comment
        git apply --check x.patch &&
          git apply x.patch ||
          true
        echo "patch files live in patches/" # patch -p1 < y.patch
        """
    assert scan(text, "apply.sh") == [(4, "or-true"), (4, "or-true")]  # masks the check and the apply


def test_makefile_recipes_and_ignore_prefix():
    text = "PATCH_REF = %s\n" % SHA + textwrap.dedent("""\
        apply:
        \tpatch --dry-run -p1 < a.patch
        \t-patch -p1 < a.patch
        \t@git apply --unidiff-zero b.patch
        notes: patch -p1 < ignored-because-not-a-recipe
        """)
    assert scan(text, "Makefile") == [(4, "or-true"), (5, "unidiff-zero"), (5, "apply-no-check")]


def test_yaml_workflow_steps():
    text = """
        jobs:
          build:
            steps:
              - run: git apply --3way overlay.patch || true
              - name: fine
                run: |
                  patch --dry-run -p1 < te.patch
                  patch -p1 < te.patch
        """
    assert scan(text, "ci.yml") == [(4, "3way-unpinned"), (4, "apply-no-check"), (4, "or-true")]


def test_exec_form_run_and_other_instructions():
    assert scan('RUN ["git", "apply", "a.patch"]\n') == [(1, "apply-no-check")]
    assert scan('LABEL note="never git apply --unidiff-zero"\nCOPY a.patch /tmp/\n') == [(1, "unidiff-zero")]


def test_directory_walk_picks_scanned_types(tmp_path):
    (tmp_path / "templates" / "partials").mkdir(parents=True)
    (tmp_path / "templates" / "partials" / "overlay.j2").write_text("RUN git apply --unidiff-zero p\n")
    (tmp_path / "Dockerfile.rocm").write_text("RUN patch -p1 < a.patch\n")
    (tmp_path / "notes.txt").write_text("RUN patch -p1 < a.patch\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hook.sh").write_text("git apply x || true\n")
    found = sorted((f.path.replace(str(tmp_path), ""), f.rule) for f in lint_paths([str(tmp_path)]))
    assert found == [
        ("/Dockerfile.rocm", "patch-no-dry-run"),
        ("/templates/partials/overlay.j2", "apply-no-check"),
        ("/templates/partials/overlay.j2", "unidiff-zero"),
    ]


def test_template_statements_inside_a_continued_run_keep_it_one_step():
    text = """
        RUN --mount=type=bind,source=patches,target=/tmp/patches \\
        {% if p.ref is defined %}
            test "$(git -C /opt/m rev-parse HEAD)" = "{{ p.ref }}" && \\
        {% endif %}
            git -C /opt/m apply --check /tmp/patches/a.patch && \\
            git -C /opt/m apply /tmp/patches/a.patch || true
        """
    assert scan(text, "patches.j2") == [(1, "or-true"), (1, "or-true")]


def test_steps_inside_sh_c_strings_are_scanned():
    assert scan("RUN sh -c 'git apply --check a.patch && git apply a.patch || true'\n") == [(1, "or-true")] * 2
    assert scan('RUN bash -ec "patch -p1 < a.patch"\n') == [(1, "patch-no-dry-run")]
    assert scan('RUN bash -e script.sh "patch -p1 < a.patch"\n') == []  # a plain argument, not a script
    assert scan('RUN bash -e -c "patch -p1 < a.patch"\n') == [(1, "patch-no-dry-run")]
    assert scan("RUN echo 'git apply --unidiff-zero x'\n") == [(1, "unidiff-zero")]  # the flag is flagged anywhere


@pytest.mark.parametrize(
    "check,pinned",
    [
        ('test "$(git -C /opt/m rev-parse HEAD)" = "%s"' % SHA, True),
        ('[ "$(git rev-parse --verify HEAD)" == %s ]' % SHA, True),
        ('test "$(git -C /opt/m rev-parse HEAD)" = "main"', False),
        ('echo "$(git rev-parse HEAD)"', False),
    ],
)
def test_3way_pinned_by_asserting_head(check, pinned):
    found = scan("RUN %s && git apply --check p.patch && git apply --3way p.patch\n" % check)
    assert (found == []) == pinned, found
