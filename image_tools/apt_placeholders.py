"""Install empty Debian packages under the names a step removes from the real base (`replaces_apt`: the CUDA
base's apt cuDNN), so `apt-get remove` finds them in a stand-in base as it does in the real one. Each is a package
with a control file only: it installs no file.

    python3 apt_placeholders.py NAMES_FILE     (one Debian package name a line)
"""

import os
import re
import subprocess
import sys
import tempfile

NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def main(argv: list) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        names = [line.strip() for line in fh if line.strip()]
    bad = [n for n in names if not NAME.match(n)]
    if bad:
        sys.stderr.write("apt_placeholders: not a Debian package name: %r\n" % bad[0])
        return 1
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        debs = []
        for name in names:
            root = os.path.join(tmp, name)
            os.makedirs(os.path.join(root, "DEBIAN"))
            with open(os.path.join(root, "DEBIAN", "control"), "w", encoding="utf-8") as fh:
                fh.write(
                    "Package: %s\nVersion: 0-standin\nArchitecture: %s\nMaintainer: stand-in <none>\n"
                    "Description: empty stand-in for the real base's package\n" % (name, arch)
                )
            deb = root + ".deb"
            subprocess.run(["dpkg-deb", "--root-owner-group", "--build", root, deb], check=True, capture_output=True)
            debs.append(deb)
        if debs:
            subprocess.run(["dpkg", "-i", *debs], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
