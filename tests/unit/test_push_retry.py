"""A builder that pushes the image itself (a remote builder, a containerd-store engine for two platforms) fails the
whole build when the registry answers its push with a 5xx, after every step and gate passed: the fleet's cold
build met `unexpected status from HEAD request ...: 500 Internal Server Error` on a fresh registry. Such a failure is
run again (its steps come from the builder's cache), boundedly; any other failure, a gate's say, is not."""

from __future__ import annotations

import pytest
from support import passing_report

import build
from toolkit.engine import builders, local_images
from toolkit.engine import docker_engine as engine
from toolkit.gates import sbom_attach
from toolkit.gates.report import NONCE_ARG

REMOTE = builders.Builder("fleet", "remote")
ARGV = ["build", "--target", "smoke", "--builder", "fleet", "--registry", "127.0.0.1:5999", "--push"]
HEAD_500 = (
    "build of smoke failed: pushing 127.0.0.1:5999/miles:smoke-0123 with docker: ERROR: unexpected status from "
    "HEAD request to http://127.0.0.1:5999/v2/miles/manifests/smoke-0123: 500 Internal Server Error"
)


class Calls(list):
    attached: list


@pytest.fixture
def builds(monkeypatch):
    """The build calls, each answering with the next of `answers` (an exception to raise, or a digest)."""
    calls, answers = Calls(), []
    monkeypatch.setattr(engine, "connect", lambda host=None: "client")
    monkeypatch.setattr(engine, "buildx_cmd", lambda: ["docker", "buildx"])
    monkeypatch.setattr(builders, "resolve", lambda name, client=None: REMOTE)
    monkeypatch.setattr(local_images, "ensure", lambda client, variant, platforms, **kw: {})

    def build_call(plan, invocation, out=print, gate_steps=None, verbose=False):
        calls.append(invocation)
        answer = answers[len(calls) - 1]
        if isinstance(answer, Exception):
            raise answer
        gate_steps.append(("done", passing_report(plan.gates, dict(invocation.build_args)[NONCE_ARG])))
        return answer

    monkeypatch.setattr(engine, "build", build_call)
    attached = []
    monkeypatch.setattr(sbom_attach, "oras_cmd", lambda: "oras")
    monkeypatch.setattr(sbom_attach, "attach_to_pushed", lambda client, variant, pushed, out: attached.append(pushed))
    calls.attached = attached
    return calls, answers


def test_a_registry_5xx_on_the_builders_push_runs_the_build_again(builds, capsys):
    calls, answers = builds
    answers += [engine.PushFailed(HEAD_500), "sha256:" + "1" * 64]
    assert build.main(ARGV) == 0
    assert len(calls) == 2 and all(c.site.push for c in calls)
    out = capsys.readouterr().out
    assert "note: the push of smoke failed (" in out and "retrying" in out
    assert f"digest: 127.0.0.1:5999/miles@sha256:{'1' * 64}" in out
    # The builder attaches its full provenance; the SBOM goes to the pushed digest, once the push succeeded.
    assert "--provenance=mode=max" in calls[-1].argv()
    assert calls.attached == [{"127.0.0.1:5999/miles": "sha256:" + "1" * 64}]


def test_a_push_that_keeps_failing_is_one_error_after_bounded_attempts(builds, capsys):
    calls, answers = builds
    answers += [engine.PushFailed(HEAD_500)] * 10
    assert build.main(ARGV) == 1
    assert len(calls) == 4  # toolkit/retry.py: ATTEMPTS
    assert calls.attached == []  # nothing pushed, nothing attached
    assert "500 Internal Server Error" in capsys.readouterr().err


@pytest.mark.parametrize(
    "failure",
    [
        engine.PushFailed("build of smoke failed: pushing r with docker: ERROR: unauthorized: authentication required"),
        engine.BuildFailed("build of smoke failed: gate step: 1 failed: import torch (500 Internal Server Error)"),
    ],
    ids=["push-refused", "gate"],
)
def test_no_other_failure_is_run_again(builds, failure):
    calls, answers = builds
    answers += [failure, "sha256:" + "1" * 64]
    assert build.main(ARGV) == 1
    assert len(calls) == 1
