"""A PEP 517 build backend in the standard library alone.

pip builds a package in an isolated environment into which it installs
the backend named in pyproject.toml; on a machine without a package index
(and in a fresh venv, which has no setuptools or wheel) that fails.  This
backend needs nothing: it zips the `deskbox` package and its metadata into
a pure-Python wheel (PEP 427) or an sdist."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "deskbox"


def _project():
    """name, version, description, requires-python from pyproject.toml."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    try:
        import tomllib
        return tomllib.loads(text)["project"]
    except ImportError:
        # Python < 3.11: the few "key = \"value\"" lines of [project].
        section = text.split("[project]", 1)[1]
        return dict(re.findall(r'^([\w-]+)\s*=\s*"([^"]*)"', section, re.M))


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"],
             "Summary: " + p.get("description", ""),
             "Requires-Python: " + p.get("requires-python", ">=3.8")]
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return p, "\n".join(lines) + "\n" + body


def _files():
    """(path in the archive, path on disk) of every file of the package."""
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, name)
            yield os.path.relpath(full, ROOT).replace(os.sep, "/"), full


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _dist_info_name(p):
    return "%s-%s.dist-info" % (p["name"].replace("-", "_"), p["version"])


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p, meta = _metadata()
    d = os.path.join(metadata_directory, _dist_info_name(p))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(meta)
    return os.path.basename(d)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p, meta = _metadata()
    info = _dist_info_name(p)
    name = "%s-%s-py3-none-any.whl" % (p["name"].replace("-", "_"), p["version"])
    wheel = ("Wheel-Version: 1.0\nGenerator: deskbox_build\nRoot-Is-Purelib: true\n"
             "Tag: py3-none-any\n")
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        entries = [(arc, open(full, "rb").read()) for arc, full in _files()]
        entries += [(info + "/METADATA", meta.encode()), (info + "/WHEEL", wheel.encode())]
        for arc, data in entries:
            z.writestr(arc, data)
            record.append("%s,%s,%d" % (arc, _record_hash(data), len(data)))
        record.append(info + "/RECORD,,")
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    p, meta = _metadata()
    base = "%s-%s" % (p["name"].replace("-", "_"), p["version"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        paths = [(arc, full) for arc, full in _files()]
        for extra in ("pyproject.toml", "README.md", "build_backend/deskbox_build.py"):
            if os.path.exists(os.path.join(ROOT, extra)):
                paths.append((extra, os.path.join(ROOT, extra)))
        for arc, full in paths:
            t.add(full, arcname=base + "/" + arc)
        data = meta.encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return name
