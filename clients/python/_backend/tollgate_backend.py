"""The build backend of tollgate-client (PEP 517, with PEP 660's editable hook).

Why not setuptools, flit or hatchling: pip builds a package in an isolated
environment holding the backend named in pyproject.toml, which it downloads
from the package index, so ``pip install ./clients/python`` fails where
there is none (an air-gapped machine, a CI runner behind a proxy), and
``--no-build-isolation`` with the system's setuptools needs the ``wheel``
package too (setuptools before 70.1). The client has no dependency and
ships only pure-Python modules, so writing its wheel takes the standard
library alone: ``zipfile``, ``hashlib``, ``tarfile``. This backend lives
in the source tree (``backend-path``), so pip installs nothing to use it
(on Python 3.9 and 3.10 it needs ``tomli``, pyproject.toml's only build
requirement there, as ``tomllib`` came with 3.11).

It reads the metadata from pyproject.toml's ``[project]`` table (the
fields that table uses: name, description, readme, requires-python,
license, dependencies) and the version, which pyproject.toml declares
dynamic, from ``tollgate/_version.py``: one place, which the client also
reads for its User-Agent. Builds are reproducible (sorted entries, fixed
times: ``SOURCE_DATE_EPOCH`` or 1980-01-01), so two builds of one tree are
the same bytes.
"""

from __future__ import annotations

import ast
import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

try:
    import tomllib
except ImportError:  # Python < 3.11: pyproject.toml requires tomli there
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = [
    "build_wheel",
    "build_sdist",
    "build_editable",
    "get_requires_for_build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_editable",
]

#: The project's root: the directory holding pyproject.toml (pip runs a
#: backend there).
ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "tollgate"
TAG = "py3-none-any"
#: Files of the package that go into the wheel; tests and caches do not.
_SHIPPED = re.compile(r".*\.py|py\.typed")
#: Files of the source tree that go into the sdist (besides the package's).
_SDIST_FILES = ("pyproject.toml", "README.md", "_backend/tollgate_backend.py")


def _project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def version() -> str:
    """The version: ``__version__`` of tollgate/_version.py, read without importing it."""
    tree = ast.parse((ROOT / PACKAGE / "_version.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "__version__" and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            return node.value.value
    raise ValueError(f"{PACKAGE}/_version.py assigns no string to __version__")


def _dist_name(name: str) -> str:
    """The name's form in file names (PEP 427, PEP 625): lower case, runs of -_. as _."""
    return re.sub(r"[-_.]+", "_", name).lower()


def metadata() -> str:
    """The core metadata (METADATA, PKG-INFO), version 2.1, from pyproject.toml."""
    p = _project()
    unknown = set(p) - {"name", "version", "dynamic", "description", "readme", "requires-python", "license",
                        "dependencies"}
    if unknown or p.get("dynamic") != ["version"] or "version" in p:
        raise ValueError(f"pyproject.toml [project]: this backend reads name, description, readme, requires-python, "
                         f"license and dependencies, with the version dynamic; found {sorted(p)}")
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {version()}",
        f"Summary: {p.get('description', '')}",
    ]
    if "license" in p:
        lines.append(f"License: {p['license']['text']}")
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    body = ""
    if "readme" in p:
        lines.append("Description-Content-Type: text/markdown")
        body = (ROOT / p["readme"]).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + body


def _epoch() -> int:
    # Zip times start in 1980.
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "0")), 315532800)


def _package_files() -> List[Tuple[str, Path]]:
    """(path in the archive, file) of the package's shipped files, sorted."""
    out = []
    for f in sorted((ROOT / PACKAGE).rglob("*")):
        rel = f.relative_to(ROOT)
        if f.is_file() and "__pycache__" not in rel.parts and _SHIPPED.fullmatch(f.name):
            out.append((rel.as_posix(), f))
    return out


def _write_wheel(wheel_directory: str, files: Dict[str, bytes]) -> str:
    name, ver = _dist_name(_project()["name"]), version()
    info = f"{name}-{ver}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = metadata().encode("utf-8")
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: tollgate_backend\nRoot-Is-Purelib: true\n"
                              f"Tag: {TAG}\n").encode()
    record = io.StringIO()
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{path},sha256={digest},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files[f"{info}/RECORD"] = record.getvalue().encode()

    filename = f"{name}-{ver}-{TAG}.whl"
    date = _zip_date()
    with zipfile.ZipFile(Path(wheel_directory) / filename, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():  # the dist-info last, RECORD at the very end
            zi = zipfile.ZipInfo(path, date)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
    return filename


def _zip_date() -> Tuple[int, int, int, int, int, int]:
    t = time.gmtime(_epoch())
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    """PEP 517: the wheel of the package, in wheel_directory; returns its file name."""
    return _write_wheel(wheel_directory, {path: f.read_bytes() for path, f in _package_files()})


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """PEP 660 (pip install -e): a wheel holding a .pth file that puts this source tree on sys.path."""
    pth = f"{_dist_name(_project()['name'])}.pth"
    return _write_wheel(wheel_directory, {pth: (str(ROOT) + "\n").encode("utf-8")})


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    """PEP 517: the source distribution (.tar.gz, PEP 625 name); returns its file name."""
    base = f"{_dist_name(_project()['name'])}-{version()}"
    members = [(rel, ROOT / rel) for rel in _SDIST_FILES] + _package_files()
    members.append(("PKG-INFO", None))
    filename = f"{base}.tar.gz"
    with open(Path(sdist_directory) / filename, "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=_epoch()) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, f in sorted(members):
            data = metadata().encode("utf-8") if f is None else f.read_bytes()
            ti = tarfile.TarInfo(f"{base}/{rel}")
            ti.size, ti.mtime, ti.mode = len(data), _epoch(), 0o644
            tar.addfile(ti, io.BytesIO(data))
    return filename


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    """Nothing beyond pyproject.toml's build requirements."""
    return []


get_requires_for_build_sdist = get_requires_for_build_wheel
get_requires_for_build_editable = get_requires_for_build_wheel
