"""The `pip_py_files` step kind (its contract is the class docstring)."""

from __future__ import annotations

from toolkit.errors import short
from toolkit.render.quoting import hash_option
from toolkit.spec.values import IDENT_RE
from toolkit.steps.base import Kind, expand, need_pin, run


class PipPyFiles(Kind):
    """`pip_py_files: PIN` with `package: IMPORT_NAME` — a wheel's top-level .py files added to an installed package.

    For a base image whose native build of a package lacks its pure-Python modules: the pin's wheel is unpacked
    into a scratch folder (no dependencies) and its `IMPORT_NAME/*.py` files copied beside the installed package's,
    never over an existing file.
    Reads: a pin of the `pip` table, the import name; the pin's locked sha256s where the family's lock holds them
    (then pip fetches exactly that file, `--require-hashes`). Leaves: the added .py files only (the scratch folder
    is removed).
    May not: replace a file of the installed package.
    """

    key = "pip_py_files"
    order = 5
    main = str
    options = {"package": str}

    def check(self, step, v, where):
        need_pin(step["value"], v, where, "pip_py_files")
        if not IDENT_RE.fullmatch(step.get("package", "")):
            raise where.error("package", f"an import name is required, got {short(step.get('package'))}")

    def uses(self, step, v):
        return {("pip", step["value"])}

    def view(self, step, v):
        name, version = step["value"], v["pip"][step["value"]]
        key = f"{expand(name, v.get('args') or {})}=={version}"
        locked = (v.get("pip_files") or {}).get(key) if not v.get("wheelhouse") else None
        return dict(step, pin=(name, version), hashes=locked or [])

    def lines(self, step, out):
        name, version = step["pin"]
        package = step["package"]
        code = f"import {package}, os; print(os.path.dirname({package}.__file__))"
        pin = out.word(f"{name}=={version}")
        if step.get("hashes"):  # exactly the locked file (any of the variant's platforms' sha256s)
            locked = out.word(f"{name}=={version}" + "".join(hash_option(s) for s in step["hashes"]))
            fetch = [
                f"printf '%s\\n' {locked} >/tmp/pip-locked.txt &&",
                f"pip install {out.pip_opts()} --no-deps --require-hashes --target=/tmp/py-files"
                " -r /tmp/pip-locked.txt &&",
                "rm /tmp/pip-locked.txt &&",
            ]
        else:
            fetch = [f"pip install {out.pip_opts()} --no-deps --target=/tmp/py-files {pin} &&"]
        return [
            run(
                out.index_mount(),
                [
                    out.index_env(),
                    *fetch,
                    f'cp -n /tmp/py-files/{out.word(package)}/*.py "$({out.word(out.python)} -c {out.word(code)})" &&',
                    "rm -rf /tmp/py-files",
                ],
            )
        ]
