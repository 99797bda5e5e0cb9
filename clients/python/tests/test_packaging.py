"""The package's build backend (_backend/tollgate_backend.py) and its version.

scripts/test-python.sh also builds the wheel with pip and installs it into a
fresh venv; these tests check what pip does not: that the wheel's RECORD is
right, that builds are reproducible, and that the version is the one the
TypeScript client carries.
"""

import base64
import hashlib
import importlib
import importlib.util
import json
import sys
import tarfile
import tempfile
import unittest
import zipfile
from pathlib import Path

import support  # noqa: F401 (puts the package on sys.path)
import tollgate

ROOT = Path(__file__).resolve().parent.parent


def _backend():
    """The backend module, imported as pip imports it (backend-path)."""
    sys.path.insert(0, str(ROOT / "_backend"))
    try:
        return importlib.import_module("tollgate_backend")
    finally:
        sys.path.remove(str(ROOT / "_backend"))


class VersionTest(unittest.TestCase):
    def test_the_typescript_client_has_the_same_version(self):
        pkg = ROOT.parent / "typescript" / "package.json"
        version = json.loads(pkg.read_text(encoding="utf-8"))["version"]
        self.assertEqual(tollgate.__version__, version, f"{pkg} and tollgate/_version.py disagree")

    def test_user_agent_names_the_version(self):
        self.assertEqual(tollgate.DEFAULT_USER_AGENT, "tollgate-python-client/" + tollgate.__version__)


@unittest.skipIf(sys.version_info < (3, 11) and importlib.util.find_spec("tomli") is None,
                 "the backend reads pyproject.toml with tomllib (3.11+) or tomli")
class BackendTest(unittest.TestCase):
    def setUp(self):
        self.backend = _backend()
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)

    def build(self, sub):
        (self.tmp / sub).mkdir()
        return self.tmp / sub / self.backend.build_wheel(str(self.tmp / sub))

    def test_wheel_is_reproducible(self):
        a, b = self.build("a"), self.build("b")
        self.assertEqual(a.name, f"tollgate_client-{tollgate.__version__}-py3-none-any.whl")
        self.assertEqual(a.read_bytes(), b.read_bytes())

    def test_wheel_holds_the_package_and_a_true_record(self):
        info = f"tollgate_client-{tollgate.__version__}.dist-info"
        with zipfile.ZipFile(self.build("w")) as zf:
            names = zf.namelist()
            self.assertEqual(names[-1], f"{info}/RECORD")
            record = zf.read(f"{info}/RECORD").decode().splitlines()
            listed = {}
            for line in record:
                path, digest, size = line.rsplit(",", 2)
                listed[path] = (digest, size)
            self.assertEqual(sorted(listed), sorted(names))
            for name in names:
                if name == f"{info}/RECORD":
                    self.assertEqual(listed[name], ("", ""))
                    continue
                data = zf.read(name)
                want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                self.assertEqual(listed[name], (want, str(len(data))), name)
            meta = zf.read(f"{info}/METADATA").decode()
        shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tollgate").iterdir()
                   if p.suffix == ".py" or p.name == "py.typed"}
        self.assertEqual({n for n in names if not n.startswith(info)}, shipped)
        self.assertIn("Name: tollgate-client\n", meta)
        self.assertIn(f"Version: {tollgate.__version__}\n", meta)
        self.assertIn("Requires-Python: >=3.9\n", meta)
        self.assertNotIn("Requires-Dist", meta)

    def test_editable_wheel_points_at_the_source_tree(self):
        (self.tmp / "e").mkdir()
        whl = self.tmp / "e" / self.backend.build_editable(str(self.tmp / "e"))
        with zipfile.ZipFile(whl) as zf:
            self.assertEqual(zf.read("tollgate_client.pth").decode().strip(), str(ROOT))

    def test_sdist_builds_again(self):
        name = self.backend.build_sdist(str(self.tmp))
        with tarfile.open(self.tmp / name) as tf:
            names = set(tf.getnames())
        base = f"tollgate_client-{tollgate.__version__}"
        for want in ("pyproject.toml", "PKG-INFO", "README.md", "_backend/tollgate_backend.py",
                     "tollgate/__init__.py", "tollgate/_version.py", "tollgate/py.typed"):
            self.assertIn(f"{base}/{want}", names)


if __name__ == "__main__":
    unittest.main()
