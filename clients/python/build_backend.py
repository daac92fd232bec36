"""
The client's build backend (PEP 517), standard library only: `pip install
./clients/python` needs no build dependency, so it works where the Python
package index cannot be reached. It packs the pure-Python package `cordon`
as a py3-none-any wheel (PEP 427), an sdist, or an editable wheel (PEP 660)
whose .pth names this directory. The metadata is pyproject.toml's [project].
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "cordon"
SDIST_FILES = ("pyproject.toml", "build_backend.py", "README.md")


def _project():
    """pyproject.toml's [project] strings (tomllib where there is one, 3.11+)."""
    path = os.path.join(HERE, "pyproject.toml")
    try:
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:
        pass
    project, section = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\s*\[([^\]]+)\]", line)
            if m:
                section = m.group(1).strip()
            elif section == "project":
                m = re.match(r'\s*([\w-]+)\s*=\s*"([^"]*)"', line)
                if m:
                    project[m.group(1)] = m.group(2)
    return project


def _names():
    p = _project()
    dist = re.sub(r"[-_.]+", "_", p["name"])
    return p, dist, f"{dist}-{p['version']}"


def _metadata():
    p, _, _ = _names()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}"]
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append(f"License: {lic['text']}")
    return "\n".join(lines) + "\n"


WHEEL = "Wheel-Version: 1.0\nGenerator: cordon build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _package_files():
    """(path in the wheel, bytes) of the package, in a stable order."""
    out = []
    root = os.path.join(HERE, PACKAGE)
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if os.path.isfile(path) and (name.endswith(".py") or name == "py.typed"):
            with open(path, "rb") as f:
                out.append((f"{PACKAGE}/{name}", f.read()))
    return out


def _write_wheel(directory, files):
    _, dist, base = _names()
    info = f"{base}.dist-info"
    files = files + [(f"{info}/METADATA", _metadata().encode()), (f"{info}/WHEEL", WHEEL.encode())]
    record = []
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{base}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data, zipfile.ZIP_DEFLATED)
    return name


# --- PEP 517 / 660 hooks --------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _, _, base = _names()
    info = os.path.join(metadata_directory, f"{base}.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(WHEEL)
    return f"{base}.dist-info"


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _, dist, _ = _names()
    return _write_wheel(wheel_directory, [(f"{dist}.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    _, _, base = _names()
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        members = [(f, os.path.join(HERE, f)) for f in SDIST_FILES]
        members += [(p, os.path.join(HERE, p)) for p, _ in _package_files()]
        for arc, path in members:
            with open(path, "rb") as f:
                data = f.read()
            ti = tarfile.TarInfo(f"{base}/{arc}")
            ti.size, ti.mode = len(data), 0o644
            t.addfile(ti, io.BytesIO(data))
        pkg_info = _metadata().encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size, ti.mode = len(pkg_info), 0o644
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
