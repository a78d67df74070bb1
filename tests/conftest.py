"""Shared fixtures: an empty CLAWD_HOME per test and the two real fixture models.

- ``smollm2_gguf``: the SmolLM2-135M GGUF. Taken from the installed default model when
  install.sh put it there, otherwise pulled once (through the real pull code) into
  ``.cache/test-models``.
- ``tiny_qwen3_gguf``: a random-weight Qwen3 written by ``fixtures.tinymodel`` for this session.
- ``daemon`` (per module, on each fixture model; a module may define its own) and ``client``,
  the official OpenAI client on it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from clawd.config import clawd_home
from clawd.models import installed, pull
from clawd.threads import openmp_env
from fixtures.daemon import RunningDaemon, start_daemon

# The tests train in this process: its OpenMP threads wait as a trainer's do (set before torch
# loads). Beside a busy machine the default spinning made these tests 5-8 times slower.
os.environ.update(openmp_env(os.environ))

# Read before any test points CLAWD_HOME elsewhere.
USER_HOME = clawd_home()
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty CLAWD_HOME; no CLAWD_* setting leaks in from the environment."""
    for key in list(os.environ):
        if key.startswith("CLAWD_"):
            monkeypatch.delenv(key)
    path = tmp_path / "clawd-home"
    monkeypatch.setenv("CLAWD_HOME", str(path))
    return path


def _find_or_pull_smollm2() -> Path:
    for home in (USER_HOME, REPO / ".cache" / "test-models"):
        for model in installed(home):
            if model.name == "smollm2-135m":
                return Path(model.path)
    return Path(pull("smollm2-135m", REPO / ".cache" / "test-models").path)


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    return _find_or_pull_smollm2()


@pytest.fixture(scope="session")
def tiny_qwen3_gguf(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.tinymodel import write_tiny_qwen3

    return write_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "tiny-qwen3.gguf", smollm2_gguf)


@pytest.fixture(scope="session", params=["smollm2", "qwen3"])
def any_gguf(request: pytest.FixtureRequest) -> Path:
    """Each model-touching test runs on both architectures."""
    name = "smollm2_gguf" if request.param == "smollm2" else "tiny_qwen3_gguf"
    return request.getfixturevalue(name)


@pytest.fixture(scope="session")
def torch_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CLAWD_HOME-like folder whose torch conversion cache outlives single tests."""
    return tmp_path_factory.mktemp("torch-cache")


@pytest.fixture(scope="session")
def lived_in_daemon(smollm2_gguf: Path, torch_cache: Path, tmp_path_factory):
    """A daemon on SmolLM2 whose home already holds one real trained adapter (a candidate).

    The signal job runs every second; automatic promotion is off, so tests decide what serves.
    Yields ``(daemon, version)``.
    """
    from clawd.config import Settings
    from clawd.store.db import Store
    from clawd.training import train
    from fixtures.daemon import start_daemon
    from tests.test_train import add_sample, small

    home = tmp_path_factory.mktemp("lived-in")
    (torch_cache / "cache").mkdir(exist_ok=True)
    (home / "cache").symlink_to(torch_cache / "cache")
    with Store.open(home) as store:
        add_sample(store, smollm2_gguf, hint="Answer in one word only.", reward=-1, kind="opd+rl")
        add_sample(store, smollm2_gguf, hint=None, reward=1, kind="rl", answer="Paris.")
        add_sample(store, smollm2_gguf, hint="Be brief.", reward=0, kind="opd")
    summary = train.run(home, Settings(model=str(smollm2_gguf), n_ctx=1024), cfg=small())
    daemon = start_daemon(
        smollm2_gguf,
        home,
        settings={
            "CLAWD_SIGNALS_INTERVAL_S": "1",
            "CLAWD_JUDGE_MAX_TOKENS": "24",
            "CLAWD_AUTO_ACTIVATE": "false",
            "CLAWD_TRAIN_EPOCHS": "1",
        },
    )
    yield daemon, summary["version"]
    daemon.stop()


@pytest.fixture(scope="module")
def daemon(any_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    d = start_daemon(any_gguf, tmp_path_factory.mktemp("daemon-home"))
    yield d
    d.stop()
    assert d.proc.returncode is not None


@pytest.fixture
def client(daemon: RunningDaemon) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{daemon.url}/v1", api_key=daemon.token, max_retries=0)
