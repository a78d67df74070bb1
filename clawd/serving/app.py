"""The daemon: an OpenAI-compatible REST API on 127.0.0.1 that records every turn.

``create_app`` builds the FastAPI app around one ``Engine`` and the ``Store``; the model loads
in the background (``/health`` answers 503 until it is ready). Every route but ``/health``
needs the bearer token from ``CLAWD_HOME/token``. Errors are OpenAI-shaped JSON: 400 for bad
input (naming the field), 401, 404, 503; a 500 only for our own faults, and the daemon stays up.
The chat route lives in ``clawd.serving.chat``; feedback, conversations, signals and training in
``clawd.serving.learnapi``, adapters in ``clawd.serving.adapterapi``, memories in
``clawd.serving.memories``.

Run alone (the same as ``clawd serve``)::

    python -m clawd.serving.app
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from clawd.adapters.registry import AdapterError
from clawd.config import (
    Settings,
    clawd_home,
    ensure_token,
    load_settings,
    private_state,
    token_path,
)
from clawd.models import ModelError, resolve, sha256_file
from clawd.serving import promote
from clawd.serving.adapterapi import router as adapter_router
from clawd.serving.chat import router as chat_router
from clawd.serving.engine import Engine, EngineError
from clawd.serving.errors import LOCAL_HOSTS, Guard, bearer_ok, install_errors, unauthorized
from clawd.serving.learnapi import router as learn_router
from clawd.serving.memories import router as memory_router
from clawd.serving.protocol import ApiError
from clawd.serving.scheduler import Jobs
from clawd.signals import standing
from clawd.signals.job import status_dict
from clawd.store.db import Store

log = logging.getLogger("clawd")
LOOPBACK = LOCAL_HOSTS


class Daemon:
    """What the routes share: settings, the store, the engine and its loading state."""

    def __init__(self, home: Path, settings: Settings, model: str) -> None:
        self.home, self.settings = home, settings
        self.model_name = model
        self.model_path = resolve(model, home)
        self.token = ensure_token(home)
        self.store = Store.open(home)
        self.engine = Engine(self.model_path, n_ctx=settings.n_ctx, n_threads=settings.n_threads)
        self.state, self.error = "loading", ""
        self.jobs_error = ""  # why learning is off while chat serves (a judge that cannot load)
        self.listen_host = ""  # the address ``run`` listens on (the setting when empty)
        self.model_sha256 = ""
        self.jobs: Jobs | None = None

    def make_jobs(self) -> Jobs:
        """Background learning jobs (not started); each has its own database connection."""
        s = self.settings
        judge_path = resolve(s.judge_model, self.home) if s.judge_model else self.model_path
        return Jobs(
            self.home,
            s,
            self.engine,
            self.model_name,
            self.model_path,
            judge_path,
            self.model_sha256,
        )

    def stop_jobs(self) -> None:
        if self.jobs is not None:
            self.jobs.stop()

    def load(self) -> None:
        try:
            t0 = time.perf_counter()
            self.model_sha256 = sha256_file(self.model_path)
            self.engine.load()
            with Store.open(self.home) as store:  # this thread's own connection
                try:
                    notes = promote.load_on_start(self.engine, store, self.home, self.model_sha256)
                except AdapterError as exc:  # never fatal: the base model serves
                    notes = [f"cannot load the active adapter ({exc}); serving the base model"]
                    log.error("%s", notes[0])
                for note in notes:
                    log.info("%s", note)
                    store.event("adapters", note)
                store.event(
                    "serve", f"loaded {self.model_name}", seconds=round(time.perf_counter() - t0, 2)
                )
            # the jobs exist before the model serves: a request that finds the daemon ready
            # finds them too (they start, and the judge loads, after)
            try:
                self.jobs = self.make_jobs()
            except ModelError as exc:  # chat still serves; /health and the TUI say why not
                self.jobs_error = f"learning is off: the judge model cannot be used: {exc}"
                log.error("%s", self.jobs_error)
            self.state = "ok"
            log.info(
                "model %s loaded (adapter %s)",
                self.model_name,
                self.engine.adapter_version or "none",
            )
            if self.jobs is not None:
                self.jobs.start()
            if self.settings.memory:  # fit the capture's classifier before the first reply
                threading.Thread(target=standing.probability, args=("hello",), daemon=True).start()
        except (EngineError, OSError) as exc:
            self.state, self.error = "error", str(exc)
            log.error("cannot load the model: %s", exc)
        except Exception as exc:  # never a silent 503 "loading": say what went wrong
            log.exception("the daemon failed to start")
            self.state, self.error = "error", f"{type(exc).__name__}: {exc}"

    def require_ready(self) -> Engine:
        if self.state == "loading":
            raise ApiError(
                503,
                "the model is still loading; retry in a moment",
                "service_unavailable",
                "model_loading",
            )
        if self.state == "error":
            raise ApiError(
                503, f"the model failed to load: {self.error}", "service_unavailable", "model_error"
            )
        return self.engine


def create_app(daemon: Daemon) -> FastAPI:

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Load in the background: /health answers 503 "loading" meanwhile.
        threading.Thread(target=daemon.load, name="clawd-load", daemon=True).start()
        yield
        daemon.stop_jobs()
        daemon.engine.close()
        daemon.store.close()

    app = FastAPI(
        title="clawd",
        version="0.1.0",
        lifespan=lifespan,
        description="A personal assistant that learns from your replies.",
    )
    app.state.daemon = daemon
    # a daemon listening beyond this machine (--allow-remote) is reached by names we cannot know
    listen = daemon.listen_host or daemon.settings.host
    hosts = None if listen not in LOOPBACK else LOCAL_HOSTS | {listen}
    app.add_middleware(Guard, hosts=hosts, token=daemon.token)
    install_errors(app)

    def token_ok(request: Request) -> bool:
        return bearer_ok(request.headers.get("authorization", ""), daemon.token)

    async def authorize(request: Request) -> Daemon:
        if not token_ok(request):
            raise unauthorized()
        return daemon

    @app.get(
        "/health",
        summary="Liveness (no token needed); with the token: model, adapter, jobs and errors",
    )
    async def health(request: Request) -> JSONResponse:
        code = 200 if daemon.state == "ok" else 503
        if not token_ok(request):  # anyone may ask whether it serves, nothing more
            return JSONResponse({"status": daemon.state}, status_code=code)
        body = {
            "status": daemon.state,
            "model": daemon.model_name,
            "adapter": daemon.engine.adapter_version,
            "error": daemon.error or None,
            "jobs": {
                "signals": status_dict(
                    daemon.jobs and daemon.jobs.signal_job,
                    daemon.store,
                    # the model serves before the jobs (and the judge) have started
                    starting=(daemon.jobs is None or daemon.jobs.signal_job is None)
                    and daemon.state == "ok"
                    and not daemon.jobs_error
                    and daemon.settings.signals_interval_s > 0,
                ),
                "training": bool(daemon.jobs and daemon.jobs.training),
                "error": daemon.jobs_error or None,
            },
        }
        return JSONResponse(body, status_code=code)

    @app.get("/v1/models", summary="The served model")
    async def models(d: Daemon = Depends(authorize)) -> dict:
        return {
            "object": "list",
            "data": [
                {
                    "id": d.model_name,
                    "object": "model",
                    "owned_by": "clawd",
                    "created": int(d.model_path.stat().st_mtime),
                }
            ],
        }

    for router in (chat_router, learn_router, adapter_router, memory_router):
        app.include_router(router, dependencies=[Depends(authorize)])
    return app


def run(
    host: str | None = None,
    port: int | None = None,
    model: str | None = None,
    allow_remote: bool = False,
) -> None:
    """Start the daemon in the foreground (what ``clawd serve`` does)."""
    import uvicorn

    home = clawd_home()
    private_state(home)  # also when started as ``python -m clawd.serving.app``
    settings = load_settings(home)
    host, port = host or settings.host, port or settings.port
    if host not in LOOPBACK and not allow_remote:
        raise SystemExit(
            f"refusing to listen on {host}: only this machine should reach clawd; "
            "pass --allow-remote if you really mean it"
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # APScheduler logs two lines per job run (promotion every 5 s): 99 % of a day's log.
    # Its errors (a job that raised) still show; clawd's jobs log what they did themselves.
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    if host not in LOOPBACK:
        log.warning(
            "!!! clawd is listening on %s: anyone who can reach it and has the token can "
            "read your conversations !!!",
            host,
        )
    daemon = Daemon(home, settings, model or settings.model)
    daemon.listen_host = host
    log.info(
        "clawd on http://%s:%d (model %s, token in %s)",
        host,
        port,
        daemon.model_name,
        token_path(home),
    )
    uvicorn.run(create_app(daemon), host=host, port=port, log_level="warning")


if __name__ == "__main__":
    run()
