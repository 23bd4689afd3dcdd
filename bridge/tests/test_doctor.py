"""The doctor CLI: exit codes for a healthy install and for a broken sglang."""

import subprocess
import sys

from sglang_attn_bridge import doctor, sglang_resolution


def test_doctor_ok_in_interpreter(no_sglang, capsys):
    assert doctor.main([]) == 0  # TRITON_INTERPRET=1 here: the self-check runs on the CPU
    out = capsys.readouterr().out
    assert "PASS self-check" in out and "in-tree (BLOCK_N 64" in out and "doctor: OK" in out
    # the plan of every representative shape, as this device (the interpreter) would run it, and why
    for label, *_ in doctor.PLAN_SHAPES:
        assert f"INFO {label:22} fwd triton 32x64 w4 s1 interior=1 | dK/dV triton 32x32" in out
    assert out.count("forward: Triton: the Triton interpreter runs no Gluon") == len(doctor.PLAN_SHAPES)


def test_doctor_fails_on_broken_sglang(monkeypatch, capsys):
    monkeypatch.setattr(sglang_resolution, "_cached", sglang_resolution.Resolution(None, True, "import failed: boom"))
    assert doctor.main([]) == 1
    assert "FAIL sglang kernel" in capsys.readouterr().out


def test_doctor_require_flags(bridge_settings, no_sglang, monkeypatch, capsys):
    assert doctor.main(["--require-sglang"]) == 1
    bridge_settings(interpreter=False)
    assert doctor.main(["--require-gpu"]) == 1


def test_doctor_runs_as_module():
    r = subprocess.run([sys.executable, "-m", "sglang_attn_bridge.doctor", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "require-gpu" in r.stdout


def test_doctor_prints_the_forward_per_class(install_sglang, capsys):
    """With an sglang kernel resolved, the doctor runs the probe (in the interpreter here) and prints each class's
    forward with the reason: this fake kernel's fp64 arithmetic differs from the in-tree bits, so sglang's stays."""
    from sglang_attn_bridge.reference import reference_varlen

    def fp64(
        q,
        o,
        k_buffer,
        v_buffer,
        k_scale,
        v_scale,
        qo_indptr,
        kv_indptr,
        kv_indices,
        prefix_lens,
        max_len_extend,
        sm_scale=None,
        logit_cap=0.0,
        is_causal=True,
        sliding_window_size=-1,
    ):
        window = None if sliding_window_size < 0 else sliding_window_size + 1
        o.copy_(
            reference_varlen(
                q.double(),
                k_buffer[kv_indices].double(),
                v_buffer[kv_indices].double(),
                qo_indptr,
                kv_indptr,
                sm_scale,
                causal=is_causal,
                window=window,
                softcap=logit_cap or None,
            )
        )

    install_sglang("sglang.kernels.ops.attention.extend_attention", fp64)
    doctor.main([])
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "auto forward" in ln]
    assert len(lines) == 4 and all("float16 D64" in ln and ": sglang (" in ln and "differ" in ln for ln in lines)
