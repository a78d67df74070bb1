"""Shared pieces of the command line: consoles, one-line failures, store and daemon access.

Not run alone; see ``clawd.cli.main``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.console import Console

from clawd.config import clawd_home, load_settings

if TYPE_CHECKING:
    from clawd.store.db import Store

# soft_wrap: a line longer than the terminal stays one line (a path or an error is copied whole)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on stderr; raise the returned Exit."""
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def open_store() -> Store:
    from clawd.store.db import Store, StoreError

    try:
        return Store.open(clawd_home())
    except StoreError as exc:
        raise fail(str(exc)) from None


def daemon_call(method: str, path: str, body: dict | None = None) -> dict | None:
    """Ask the running daemon (None when none answers); errors become one-line failures."""
    import httpx

    from clawd.config import ensure_token

    home = clawd_home()
    settings = load_settings(home)
    url = f"http://{settings.host}:{settings.port}{path}"
    try:
        resp = httpx.request(
            method,
            url,
            json=body,
            timeout=120,
            headers={"Authorization": f"Bearer {ensure_token(home)}"},
        )
    except httpx.ConnectError:
        return None
    except httpx.HTTPError as exc:
        raise fail(f"the daemon did not answer: {exc}") from None
    if resp.status_code >= 400:
        raise fail(resp.json().get("error", {}).get("message", resp.text))
    return resp.json()
