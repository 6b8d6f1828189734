#!/usr/bin/env python3
"""Build the krew release archive of kubectl-repack and write its sha256 into krew-manifest.yaml.

The archive holds one self-contained zipapp, `kubectl-repack`, runnable by any `python3` >= 3.10
on Linux and macOS, amd64 and arm64 alike: the pure-Python packages `planner` and `kubectl_repack`
plus their dependencies vendored with `pip install --target`. Compiled extension modules are
removed after vendoring; every dependency chosen here has a pure-Python fallback (PyYAML,
pyrsistent, charset-normalizer), and the build fails if anything compiled is left. Two pins keep
the set pure: jsonschema < 4.18 (later versions need the compiled rpds-py) and kubernetes < 36
(36 pulls aiohttp, 37 pydantic-core). The webhook is not part of the plugin.

The vendored set is the one in constraints.txt, the same pins the pip install and the tests use,
so the zipapp runs exactly the library versions CI tested. The build is reproducible: files are
sorted and carry fixed timestamps, so the same sources and pins give the same sha256, and the
committed krew-manifest.yaml must carry that sha256 (a test builds and compares). Vendored packages are cached under
~/.cache/kubectl-repack/release (never in the repository), keyed by requirements and Python.

    python3 hack/release.py                      # dist/kubectl-repack-v0.1.0.tar.gz + manifest
    python3 hack/release.py --dist /tmp/d --manifest /tmp/d/krew-manifest.yaml
"""
import argparse
import gzip
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("planner", "kubectl_repack")
ENTRY_MODULE, ENTRY_FUNCTION = "kubectl_repack.cli", "main"
BIN = "kubectl-repack"
EXTRA_FILES = ("LICENSE", "README.md")
MIN_PYTHON = (3, 10)
REQUIREMENTS = (
    "click>=8.1",
    "PyYAML>=6.0",
    "jsonschema>=4.17,<4.18",
    "kubernetes>=29.0.0,<36",
    "durationpy>=0.7",
)
CONSTRAINTS = REPO / "constraints.txt"
COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # earliest a zip entry can carry
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kubectl-repack" / "release"

MAIN_PY = f'''"""Entry point of the kubectl-repack zipapp."""
import sys

if sys.version_info < {MIN_PYTHON!r}:
    sys.exit("kubectl-repack needs Python >= {".".join(map(str, MIN_PYTHON))}, this is "
             + sys.version.split()[0])

from {ENTRY_MODULE} import {ENTRY_FUNCTION}

sys.exit({ENTRY_FUNCTION}())
'''


def manifest_version(manifest):
    return yaml.safe_load(manifest.read_text())["spec"]["version"]


def _ignore_junk(_directory, names):
    return [n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))]


def vendor(cache):
    """Pure-Python dependencies in a cached directory; built once per requirement set."""
    pins = CONSTRAINTS.read_text()
    key = hashlib.sha256("\n".join(REQUIREMENTS + (f"py{MIN_PYTHON}", pins)).encode()).hexdigest()[:16]
    target = cache / f"vendor-{key}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix="vendor-", dir=cache))
    # Resolve for the oldest supported Python so its conditional dependencies are included too.
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-conflicts",
         "--root-user-action=ignore",
         "--no-compile", "--target", str(staging), "--cache-dir", str(cache / "pip"),
         "--python-version", ".".join(map(str, MIN_PYTHON)), "--only-binary=:all:",
         "--constraint", str(CONSTRAINTS), *REQUIREMENTS],
        check=True)
    shutil.rmtree(staging / "bin", ignore_errors=True)
    for path in sorted(staging.rglob("*")):
        if path.is_file() and (path.suffix in COMPILED_SUFFIXES or ".so." in path.name):
            path.unlink()
        elif path.is_dir() and path.name == "__pycache__":
            shutil.rmtree(path)
    staging.rename(target)
    (target / ".complete").write_text("\n".join(REQUIREMENTS) + "\n")
    return target


def stage_app(app, vendored):
    """Lay out the zipapp tree: vendored dependencies, our packages, __main__.py."""
    shutil.copytree(vendored, app, ignore=shutil.ignore_patterns(".complete", "__pycache__"))
    for package in PACKAGES:
        # symlinks=False: the packaged CRD is a symlink to config/crd; the zipapp gets its bytes.
        shutil.copytree(REPO / package, app / package, symlinks=False, ignore=_ignore_junk)
    (app / "__main__.py").write_text(MAIN_PY)
    compiled = [p for p in app.rglob("*") if p.suffix in COMPILED_SUFFIXES]
    if compiled:
        raise SystemExit(f"compiled modules would make the zipapp platform-bound: {compiled}")


def build_zipapp(app, target):
    """A zip with a python3 shebang, entries sorted and timestamps fixed (reproducible)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(app.rglob("*")):
            if path.is_dir():
                continue
            info = zipfile.ZipInfo(path.relative_to(app).as_posix(), date_time=FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(info, path.read_bytes())
    target.write_bytes(b"#!/usr/bin/env python3\n" + buffer.getvalue())
    target.chmod(0o755)


def build_tarball(members, target):
    """tar.gz of (name, path) pairs, normalised so equal inputs give equal bytes."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, path in sorted(members):
            info = tarfile.TarInfo(name)
            data = path.read_bytes()
            info.size, info.mtime, info.uid, info.gid = len(data), 0, 0, 0
            info.uname = info.gname = ""
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            archive.addfile(info, io.BytesIO(data))
    with open(target, "wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out,
                                                  mtime=0) as gz:
        gz.write(raw.getvalue())


def sha256_of(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rewrite_manifest(manifest, digest, file_names):
    """Set every platform's sha256 and file list, keeping the manifest's layout and comments."""
    text = manifest.read_text()
    text, count = re.subn(r"(?m)^([ ]*sha256:[ ]*).*$", lambda m: f'{m.group(1)}"{digest}"', text)
    if count == 0:
        raise SystemExit(f"{manifest}: no sha256 field to rewrite")

    def files_block(match):
        indent = match.group("indent")
        items = "".join(f'{indent}  - from: "{name}"\n{indent}    to: "."\n' for name in file_names)
        return f"{indent}files:\n{items}"

    # Keep each platform's files in step with what the archive holds (LICENSE once it exists).
    text = re.sub(r"(?m)^(?P<indent>[ ]*)files:\n(?:(?P=indent)[ ]+\S.*\n)*", files_block, text)
    parsed = yaml.safe_load(text)
    for platform in parsed["spec"]["platforms"]:
        if platform["sha256"] != digest or [f["from"] for f in platform["files"]] != file_names:
            raise SystemExit(f"{manifest}: could not rewrite platform {platform['selector']}")
    manifest.write_text(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=REPO / "dist",
                        help="where to write the archive (default: dist/)")
    parser.add_argument("--manifest", type=Path, default=REPO / "krew-manifest.yaml",
                        help="krew manifest whose sha256 fields are rewritten in place")
    parser.add_argument("--cache", type=Path, default=CACHE, help="vendored packages cache")
    args = parser.parse_args(argv)

    version = manifest_version(args.manifest)
    args.dist.mkdir(parents=True, exist_ok=True)
    args.cache.mkdir(parents=True, exist_ok=True)
    archive = args.dist / f"kubectl-repack-{version}.tar.gz"
    with tempfile.TemporaryDirectory(prefix="kubectl-repack-release-") as scratch:
        scratch = Path(scratch)
        stage_app(scratch / "app", vendor(args.cache))
        build_zipapp(scratch / "app", scratch / BIN)
        members = [(BIN, scratch / BIN)]
        members += [(name, REPO / name) for name in EXTRA_FILES if (REPO / name).is_file()]
        build_tarball(members, archive)
    digest = sha256_of(archive)
    file_names = [name for name, _ in members if name != "README.md"]
    rewrite_manifest(args.manifest, digest, file_names)
    print(f"{archive}  sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
