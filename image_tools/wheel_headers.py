"""Put the C headers of NVIDIA library wheels where a CUDA development base's apt packages put theirs (`/usr/include`):
a stand-in base's cuDNN and NCCL headers, which the real base has from libcudnn9-dev and libnccl-dev and a
compiling step (TransformerEngine's torch extension) includes as `<cudnn.h>` and `<nccl.h>`.

    python3 wheel_headers.py WHEEL_DIR TARGET_DIR     (every nvidia/<lib>/include/ file of each wheel in WHEEL_DIR)
"""

import os
import posixpath
import sys
import zipfile


def main(argv: list) -> int:
    wheels, target = argv[1], argv[2]
    written = 0
    for name in sorted(os.listdir(wheels)):
        if not name.endswith(".whl"):
            continue
        with zipfile.ZipFile(os.path.join(wheels, name)) as whl:
            for member in whl.infolist():
                parts = member.filename.split("/")
                if member.is_dir() or len(parts) < 4 or parts[0] != "nvidia" or parts[2] != "include":
                    continue
                rel = posixpath.normpath("/".join(parts[3:]))
                if rel.startswith(("../", "/")) or rel == "..":
                    sys.stderr.write("wheel_headers: %s: a member outside its include folder: %r\n" % (name, rel))
                    return 1
                dest = os.path.join(target, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with whl.open(member) as src, open(dest, "wb") as out:
                    out.write(src.read())
                written += 1
    if not written:
        sys.stderr.write("wheel_headers: no nvidia/<lib>/include/ file in %s\n" % wheels)
        return 1
    print("wheel_headers: %d header files in %s" % (written, target))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
