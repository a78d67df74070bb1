"""Each setting's value and where it came from (``clawd config show``), and edits of
``config.toml`` that keep the user's comments and other keys, checked like the file
(``clawd config set|unset``, ``clawd models use``).

Run alone to print each setting with its source::

    python -m clawd.configfile
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from pydantic import ValidationError

from clawd.config import (
    ENV_PREFIX,
    SECRETS,
    ConfigError,
    Settings,
    clawd_home,
    config_path,
    explain,
    load_settings,
    read_config_file,
)


@dataclass(frozen=True)
class SettingReport:
    name: str
    value: Any
    source: str
    description: str


def describe(home: Path | None = None) -> list[SettingReport]:
    """Each setting's effective value (secrets masked) and where it came from."""
    home = home or clawd_home()
    file_values = read_config_file(home)
    settings = load_settings(home, file_values)
    rows = []
    for name, field in Settings.model_fields.items():
        env = ENV_PREFIX + name.upper()
        if env in os.environ:
            source = f"env {env}"
        elif name in file_values:
            source = str(config_path(home))
        else:
            source = "default"
        value = getattr(settings, name)
        if name in SECRETS and value:
            value = "*" * 8  # shown as set, never printed
        rows.append(SettingReport(name, value, source, field.description or ""))
    return rows


def _known(name: str) -> None:
    if name not in Settings.model_fields:
        known = ", ".join(Settings.model_fields)
        raise ConfigError(f"unknown setting {name!r}; known: {known}")


def set_value(home: Path, name: str, value: Any) -> Any:
    """Write one setting to ``config.toml``, keeping the user's comments and other keys;
    ``value`` may be text as typed ("true", "0.5"), checked and converted like the file's.
    Returns the value written."""
    _known(name)
    current = read_config_file(home)
    try:
        checked = getattr(Settings(**{**current, name: value}), name)
    except ValidationError as exc:
        raise explain(exc, home) from None
    if not isinstance(checked, str | int | float | bool | list | dict):
        checked = str(checked)  # a path: TOML holds its text
    _write(home, lambda doc: doc.__setitem__(name, checked))
    return checked


def unset_value(home: Path, name: str) -> bool:
    """Remove one setting from ``config.toml`` (its default applies again); whether it was
    there. The rest of the file must still be valid without it."""
    _known(name)
    current = read_config_file(home)
    if name not in current:
        return False
    try:
        Settings(**{k: v for k, v in current.items() if k != name})
    except ValidationError as exc:
        raise explain(exc, home) from None
    _write(home, lambda doc: doc.pop(name))
    return True


def _write(home: Path, change: Any) -> None:
    """Apply ``change`` to config.toml's document and replace the file whole."""
    path = config_path(home)
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    change(doc)
    home.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(tomlkit.dumps(doc), encoding="utf-8")
    tmp.replace(path)


if __name__ == "__main__":
    for row in describe():
        print(f"{row.name} = {row.value!r}  ({row.source})")
