"""Configuration: where clawd keeps its state and the settings the user can change.

One environment variable, ``CLAWD_HOME``, roots every piece of user state (models, the database,
adapters, the token, ``config.toml``). It defaults to ``$XDG_DATA_HOME/clawd`` or
``~/.local/share/clawd``. Settings are read, lowest priority first, from their defaults, from
``CLAWD_HOME/config.toml`` and from ``CLAWD_<NAME>`` environment variables.

Run alone to print the effective settings::

    python -m clawd.config
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

ENV_PREFIX = "CLAWD_"
SECRETS = frozenset({"judge_api_key"})  # `describe` masks their values
# Settings that measured no gain and were removed (docs/experiments.md, "Removed from the
# code"): a config.toml that still sets one loads, with a warning, instead of failing.
REMOVED_SETTINGS = frozenset(
    {
        "gate_new_degenerate",
        "train_distill_topk",
        "train_hindsight_guidance",
        "train_loop_guard",
        "train_teacher_check",
        "train_unlikelihood_general",
    }
)
# Values of a setting that were removed the same way: an old config.toml's is left out, with a
# warning, and the default applies.
REMOVED_VALUES = {("train_method", "hindsight")}

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """The configuration file or an environment variable holds a value clawd cannot use."""


def clawd_home() -> Path:
    """The folder that roots all user state: ``CLAWD_HOME``, else the XDG data directory."""
    explicit = os.environ.get("CLAWD_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser().resolve() / "clawd"


def private_state(home: Path | None = None) -> None:
    """Keep the user's state private: files created from now on are 0600, folders 0700, and
    ``CLAWD_HOME`` itself is 0700 (conversations, the database and the logs are personal).

    Called first by the ``clawd`` command (so the daemon and its trainer inherit it) and by the
    trainer when run alone.
    """
    os.umask(0o077)
    home = home or clawd_home()
    if home.is_dir():
        with contextlib.suppress(OSError):  # not ours to change (a folder of another owner)
            home.chmod(0o700)


def config_path(home: Path) -> Path:
    return home / "config.toml"


def token_path(home: Path) -> Path:
    return home / "token"


def ensure_token(home: Path) -> str:
    """The API token, created on first use with mode 0600."""
    path = token_path(home)
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    home.mkdir(parents=True, exist_ok=True)
    token = "clawd-" + secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


class Settings(BaseSettings):
    """Every setting clawd reads. The descriptions feed ``clawd config show``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    model: str = Field(
        "smollm2-135m",
        description="Model to serve: a name from `clawd models list` or a path to a GGUF file.",
    )
    host: str = Field("127.0.0.1", description="Address the daemon listens on.")
    port: int = Field(8765, ge=1, le=65535, description="TCP port of the REST API.")
    n_ctx: int = Field(
        4096, ge=256, le=262144, description="Context window in tokens (prompt plus answer)."
    )
    n_threads: int = Field(
        0,
        ge=0,
        le=1024,
        description="CPU threads for inference; 0: llama.cpp's choice (half the cores while "
        "writing an answer, all of them while reading the prompt).",
    )
    hub_endpoint: str = Field(
        "",
        description="Model hub address for `clawd models pull` (a mirror); empty uses "
        "huggingface_hub's default or HF_ENDPOINT.",
    )
    judge_model: str = Field(
        "",
        description="Model that judges replies: an installed name or .gguf path; empty uses "
        "the served model without any adapter.",
    )
    judge_mode: Literal["probe", "generate"] = Field(
        "probe",
        description="How the local judge scores a reply: 'probe' (a classifier over the "
        "model's hidden states and cues of the reply; needs no writing, best on small models) "
        "or 'generate' (the model writes judge_votes votes ending in \\boxed{score}).",
    )
    judge_url: str = Field(
        "",
        description="An OpenAI-compatible endpoint (e.g. http://127.0.0.1:11434/v1) that "
        "judges instead of the local model, with written votes; empty: the local judge.",
    )
    judge_api_key: str = Field("", description="API key for judge_url (sent as a bearer token).")
    judge_model_name: str = Field("", description="The model name to ask for at judge_url.")
    judge_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="Seconds one call to judge_url may take before a retry."
    )
    judge_votes: int = Field(
        3, ge=1, le=15, description="Written judge votes per turn (majority wins)."
    )
    judge_temperature: float = Field(
        0.6, ge=0.0, le=2.0, description="Sampling temperature of the judge's votes."
    )
    judge_max_tokens: int = Field(
        96, ge=8, le=2048, description="Most tokens a judge may reason before it must score."
    )
    hint_extractor: Literal["judge", "reply"] = Field(
        "reply",
        description="Where hints come from: 'judge' (the model writes them) or 'reply' (the "
        "user's corrective message itself, when the judge scored -1; better for small models).",
    )
    signals_interval_s: int = Field(
        30,
        ge=0,
        le=86400,
        description="Seconds between runs of the background signals job; 0 switches it off.",
    )
    memory: bool = Field(
        True,
        description='Remember standing preferences and facts you state in a reply ("call me '
        'Ana", "keep answers short", "I\'m vegetarian") and put them in the system message '
        "of every answer from the next on, until an adapter has learned them; false: clawd "
        "neither makes nor uses memories.",
    )
    memory_tokens: int = Field(
        256,
        ge=16,
        le=8192,
        description="Most prompt tokens the memories may take in an answer; beyond it the least "
        "recently confirmed are left out (the answer's response says which).",
    )
    memory_keep_learned: bool = Field(
        False,
        description="Keep memories in the prompt after an adapter has learned them (costs "
        "prompt tokens; off: a learned memory leaves the prompt, and comes back if a later "
        "adapter or a rollback loses it).",
    )
    require_approval: bool = Field(
        False, description="Samples wait for `clawd signals approve` before they can train."
    )
    hint_placement: Literal["user", "system"] = Field(
        "user",
        description="Where the trainer's teacher context puts the hint: appended to the last "
        "user message (the paper) or as a system message (better on SmolLM2 in probes).",
    )
    train_method: Literal["combined", "rl", "opd"] = Field(
        "combined",
        description="What a training run learns from: both the hint (OPD) and the reward "
        "(binary RL), or only one of them (to compare what each teaches; bench/learning.py).",
    )
    train_lr: float = Field(
        1e-4,
        gt=0,
        lt=1,
        description="LoRA learning rate: small, so an update is many small steps that the trust "
        "region (train_target_kl) ends, not one large one.",
    )
    train_epochs: int = Field(
        6,
        ge=1,
        le=100,
        description="Passes over the samples per run, at most (the trust region "
        "usually ends a run sooner).",
    )
    train_niceness: int = Field(
        10,
        ge=0,
        le=19,
        description="How far the training process yields the CPU to your other work: Unix "
        "nice steps below the daemon's priority (0-19; 0 trains at the daemon's own).",
    )
    train_kl_coef: float = Field(
        0.05,
        ge=0,
        le=10,
        description="Initial coefficient of the k3 KL penalty toward the base model; it adapts "
        "during training to keep the drift near gate_max_kl (0 switches the penalty off).",
    )
    train_target_kl: float = Field(
        0.05,
        ge=0,
        le=10,
        description="Trust region of one update: its steps stop once the KL to the pre-update "
        "model on the batch passes this, and a step that lands past twice it is undone and "
        "retaken at half the rate (nats per token; 0 switches it off).",
    )
    train_replay: int = Field(
        16,
        ge=0,
        le=4096,
        description="Earlier trained samples replayed in each run (at most as many as new "
        "ones), so what was learned is kept while new samples add to it.",
    )
    train_opd_baseline: bool = Field(
        True,
        description="Take the hint's per-token signal on the model's own answers relative to "
        "its average at each position, so that on average it pushes no answer down (off: the "
        "signal as OpenClaw-RL defines it, which pushes the model's own answers down).",
    )
    train_unlikelihood: float = Field(
        1.0,
        ge=0,
        le=100,
        description="Weight of a term that trains the model away from repeating itself: the "
        "tokens that repeat a phrase of their own answer, in the training answers and in the "
        "model's greedy answers to your recent prompts before the update, are pushed down "
        "(unlikelihood training); 0 switches it off.",
    )
    train_threads: int = Field(
        0, ge=0, le=1024, description="CPU threads for training; 0 lets torch decide."
    )
    train_at: str = Field(
        "03:30",
        pattern=r"^([01]\d|2[0-3]):[0-5]\d$",
        description="Local time (HH:MM) of the nightly training run.",
    )
    train_backend: Literal["local", "ray"] = Field(
        "local",
        description="Where a training run's update runs: in a process on this machine, or on "
        "a Ray cluster (needs the ray extra: pip install 'clawd[ray]'); the gate and the "
        "hot-load run here either way.",
    )
    ray_address: str = Field(
        "auto",
        pattern=r"^(auto|(ray://)?(\[[0-9a-fA-F:]+\]|[^\s:/\[\]]+):\d{1,5})$",
        description="The Ray cluster for train_backend = ray: 'auto' (a cluster this machine "
        "belongs to), host:port of its head, or ray://host:10001 (Ray Client, from a machine "
        "outside the cluster).",
    )
    ray_model_path: str = Field(
        "",
        description="Path of the base GGUF on the Ray workers (a shared disk); empty ships "
        "the model through Ray's object store with each run.",
    )
    ray_num_gpus: float = Field(
        0, ge=0, le=1024, description="GPUs a Ray training run asks for (0: CPU training)."
    )
    ray_num_cpus: float = Field(1, gt=0, le=4096, description="CPUs a Ray training run asks for.")
    ray_memory_gb: float = Field(
        0, ge=0, le=65536, description="Memory a Ray training run reserves (GB; 0: no reservation)."
    )
    train_min_samples: int = Field(
        16,
        ge=1,
        le=100000,
        description="Also train when this many new samples wait and the user is idle.",
    )
    train_idle_minutes: int = Field(
        30, ge=1, le=10080, description="How long the user must be idle for that early run."
    )
    gate_max_kl: float = Field(
        0.5,
        gt=0,
        le=100,
        description="Promotion gate: drift budget, the most mean per-token KL to the base "
        "model on general conversations (nats) an adapter may show, all updates together.",
    )
    gate_step_kl: float = Field(
        0.25,
        gt=0,
        le=100,
        description="Promotion gate: the most KL to its parent adapter one update may add.",
    )
    gate_loop_samples: int = Field(
        0,
        ge=0,
        le=64,
        description="Promotion gate: when an adapter's greedy answer loops where the base "
        "model's does not, ask that prompt this many times more at the chat's default "
        "temperature, and count the loop only if the adapter's sampled answers loop in at "
        "least 2 more of them than the base model's (0: every greedy loop counts).",
    )
    gate_retries: int = Field(
        2,
        ge=0,
        le=8,
        description="Promotion gate: when an update fails only for drift or ability, how many "
        "earlier points of it (about half its steps, then a quarter) to judge instead; the first "
        "that passes serves (0: none).",
    )
    auto_activate: bool = Field(
        True, description="Hot-load a new adapter as soon as it passes the promotion gate."
    )
    adapters_keep: int = Field(
        10,
        ge=2,
        le=1000,
        description="Adapter versions to keep; older ones are deleted (never the active one "
        "or its parent).",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # init kwargs carry config.toml; the environment overrides the file.
        return (env_settings, init_settings)


def read_config_file(home: Path) -> dict[str, Any]:
    """The key/value pairs of ``config.toml`` ({} when there is none), checked against Settings;
    keys of ``REMOVED_SETTINGS`` and values of ``REMOVED_VALUES`` are left out with a warning."""
    path = config_path(home)
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it as TOML: {exc}") from exc
    removed = sorted(set(data) & REMOVED_SETTINGS)
    removed += [f"{k} = {v!r}" for k, v in sorted(REMOVED_VALUES) if data.get(k) == v]
    if removed:
        log.warning("%s: ignoring removed setting(s) %s", path, ", ".join(removed))
        data = {
            k: v
            for k, v in data.items()
            if k not in REMOVED_SETTINGS and (k, v) not in REMOVED_VALUES
        }
    unknown = sorted(set(data) - set(Settings.model_fields))
    if unknown:
        known = ", ".join(Settings.model_fields)
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {known}")
    return data


def explain(exc: ValidationError, home: Path) -> ConfigError:
    """The ConfigError of a settings ValidationError: each bad setting named, with its reason."""
    problems = []
    for err in exc.errors():
        name = ".".join(str(p) for p in err["loc"])
        env = ENV_PREFIX + name.upper()
        where = f"environment variable {env}" if env in os.environ else str(config_path(home))
        problems.append(f"{name} ({where}): {err['msg']}")
    return ConfigError("invalid setting: " + "; ".join(problems))


def load_settings(home: Path | None = None, file_values: dict[str, Any] | None = None) -> Settings:
    """Effective settings for ``home`` (default: :func:`clawd_home`); ``file_values``: its
    ``config.toml`` as ``read_config_file`` gave it, when already read."""
    home = home or clawd_home()
    try:
        return Settings(**(read_config_file(home) if file_values is None else file_values))
    except ValidationError as exc:
        raise explain(exc, home) from None


if __name__ == "__main__":
    print(f"CLAWD_HOME = {clawd_home()}")
    for name, value in load_settings():
        print(f"{name} = {value!r}")
