"""Debian packages: `apt-get download` (reusing a copy already downloaded), `dpkg-deb` to read and unpack them,
and the pages of an unpacked package that a set reads. No root is needed, but the apt lists must exist."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from components.common.paths import cache_root
from experiments.datasets.doc_sets.errors import DocSetError


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    deb: Path
    sha256: str


def default_deb_dir() -> Path:
    """Where downloaded packages are kept: `<cache root>/downloads/debs`."""
    return cache_root() / "downloads" / "debs"


def download_package(package: str, deb_dir: Path) -> Package:
    """`apt-get download <package>` into `deb_dir` (reused when the candidate version is already there)."""
    for tool in ("apt-get", "apt-cache", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise DocSetError(f"{tool} not found: building doc sets needs a Debian/Ubuntu system")
    policy = subprocess.run(
        ["apt-cache", "policy", package], capture_output=True, text=True, check=False
    ).stdout
    candidate = re.search(r"Candidate:\s*(\S+)", policy)
    if not candidate or candidate.group(1) == "(none)":
        raise DocSetError(
            f"apt knows no candidate version of {package!r}: run `apt-get update` (as root) so the package "
            "lists exist, or pass --deb FILE"
        )
    deb_dir.mkdir(parents=True, exist_ok=True)
    version = candidate.group(1)
    # apt writes an epoch into the file name as `%3a` (`4%3a7.4.7-1`); older apt dropped it.
    names = {f"{package}_{version.replace(':', '%3a')}_*.deb", f"{package}_{version.split(':', 1)[-1]}_*.deb"}
    existing = sorted(path for name in names for path in deb_dir.glob(name))
    if not existing:
        result = subprocess.run(
            ["apt-get", "download", package], cwd=deb_dir, capture_output=True, text=True, check=False
        )
        existing = sorted(path for name in names for path in deb_dir.glob(name))
        if result.returncode != 0 or not existing:
            raise DocSetError(f"apt-get download {package} failed: {_last_line(result.stderr)}")
    return package_info(existing[-1])


def package_info(deb: Path) -> Package:
    """Name, version and SHA-256 of `deb`; DocSetError when it is no Debian package."""
    fields = {}
    for key in ("Package", "Version"):
        result = subprocess.run(["dpkg-deb", "-f", str(deb), key], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise DocSetError(f"--deb {deb}: not a Debian package ({_last_line(result.stderr)})")
        fields[key] = result.stdout.strip()
    digest = hashlib.sha256(deb.read_bytes()).hexdigest()
    return Package(fields["Package"], fields["Version"], deb, digest)


def _last_line(text: str) -> str:
    """A tool's error output as one line: its last non-empty line, which says what failed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no error output"


@contextmanager
def unpacked(deb: Path) -> Iterator[Path]:
    """`deb` unpacked (`dpkg-deb -x`) into a temporary folder, deleted on leaving."""
    with tempfile.TemporaryDirectory(prefix="ragtune-docset-") as tmp:
        subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True)
        yield Path(tmp)


def select_pages(root: Path, include: Sequence[str], exclude: Sequence[str]) -> list[Path]:
    """Files under `root` matching an include pattern and no exclude pattern (relative POSIX paths), sorted."""
    pages = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if not path.is_file() or any(fnmatch.fnmatchcase(relative, p) for p in exclude):
            continue
        if any(fnmatch.fnmatchcase(relative, p) for p in include):
            pages.append(path)
    return pages
