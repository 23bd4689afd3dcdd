"""image_tools/wheel_headers.py, which a stand-in base runs: the headers of NVIDIA library wheels land in the target
folder as the apt dev packages lay them out (`<cudnn.h>`, `<nccl.h>`); nothing else of the wheel does, and a member
that would leave its include folder stops it."""

import subprocess
import sys
import zipfile
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "image_tools" / "wheel_headers.py"


def _wheel(folder: Path, name: str, members: dict) -> None:
    with zipfile.ZipFile(folder / name, "w") as whl:
        for path, body in members.items():
            whl.writestr(path, body)


def _run(wheels: Path, target: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), str(wheels), str(target)], capture_output=True, text=True)


def test_headers_of_each_wheel_land_where_apt_puts_them(tmp_path):
    wheels, target = tmp_path / "whl", tmp_path / "include"
    wheels.mkdir()
    _wheel(wheels, "nvidia_cudnn_cu13-9.22-py3-none-x.whl", {
        "nvidia/cudnn/include/cudnn.h": "#define CUDNN_MAJOR 9\n",
        "nvidia/cudnn/include/sub/cudnn_graph.h": "// graph\n",
        "nvidia/cudnn/lib/libcudnn.so.9": "ELF",
        "nvidia_cudnn_cu13-9.22.dist-info/METADATA": "Name: nvidia-cudnn-cu13\n",
    })  # fmt: skip
    _wheel(wheels, "nvidia_nccl_cu13-2.28-py3-none-x.whl", {"nvidia/nccl/include/nccl.h": "#define NCCL_MAJOR 2\n"})
    run = _run(wheels, target)
    assert run.returncode == 0, run.stderr
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == [
        "cudnn.h", "nccl.h", "sub/cudnn_graph.h",
    ]  # fmt: skip
    assert (target / "cudnn.h").read_text() == "#define CUDNN_MAJOR 9\n"
    assert "3 header files" in run.stdout


def test_a_member_leaving_its_include_folder_or_no_header_at_all_fails(tmp_path):
    wheels, target = tmp_path / "whl", tmp_path / "include"
    wheels.mkdir()
    _wheel(wheels, "evil.whl", {"nvidia/x/include/../../../../escape.h": "x"})
    run = _run(wheels, target)
    assert run.returncode == 1 and "outside its include folder" in run.stderr
    assert not (tmp_path / "escape.h").exists() and not target.exists()
    (wheels / "evil.whl").unlink()
    _wheel(wheels, "libs-only.whl", {"nvidia/x/lib/libx.so": "ELF"})
    run = _run(wheels, target)
    assert run.returncode == 1 and "no nvidia/<lib>/include/ file" in run.stderr
