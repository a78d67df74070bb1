"""The daemon: an OpenAI-compatible REST API on 127.0.0.1 that records every turn.

``create_app`` builds the FastAPI app around one ``Engine`` and the ``Store``; the model loads
in the background (``/health`` answers 503 until it is ready). Every route but ``/health``
needs the bearer token from ``CLAWD_HOME/token``. Errors are OpenAI-shaped JSON: 400 for bad
input (naming the field), 401, 404, 503; a 500 only for our own faults, and the daemon stays up.
The chat route itself lives in ``clawd.serving.chat``.

Run alone (the same as ``clawd serve``)::

    python -m clawd.serving.app
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from adapters import promote, registry
from adapters.registry import AdapterError
from adapters.routes import router as adapter_router
from clawd import trainlock
from clawd.config import (
    Settings,
    clawd_home,
    ensure_token,
    load_settings,
    private_state,
    token_path,
)
from clawd.models import ModelError, resolve, sha256_file
from clawd.scheduler import Jobs, TrainerNotStarted, training_status
from clawd.serving.chat import router as chat_router
from clawd.serving.engine import Engine, EngineError
from clawd.serving.errors import LOCAL_HOSTS, Guard, bearer_ok, install_errors, unauthorized
from clawd.serving.memories import router as memory_router
from clawd.serving.protocol import ApiError, ConversationUpdate, FeedbackRequest
from clawd.signals import review, standing
from clawd.signals.job import feedback_signal, status_dict
from clawd.signals.memory import notices, remember
from clawd.signals.waiting import why_no_run
from clawd.store import memories, record
from clawd.store.db import Store

log = logging.getLogger("clawd")
# Ids are SQLite integers: larger ones are refused at the edge (400 naming the field, never 500).
SignalId = PathParam(..., ge=1, le=2**63 - 1, description="A signal id (see GET /v1/signals).")
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


def _remember_comment(d: Daemon, turn_id: str, comment: str) -> list[dict]:
    """Memories from a feedback comment on ``turn_id``, unless its conversation is opted out
    of learning; each as ``{"id", "text", "replaced"}``."""
    turn = d.store.db["turns"].get(turn_id)
    if not turn["learn"]:
        return []
    made = remember(
        d.store,
        comment,
        source="feedback",
        turn_id=turn_id,
        conversation_id=turn["conversation_id"],
    )
    return notices(made)


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

    @app.post("/v1/feedback", summary="Rate a response (+1/-1) with an optional comment")
    async def feedback(body: FeedbackRequest, d: Daemon = Depends(authorize)) -> dict:
        try:
            fid = record.add_feedback(d.store, body.id, body.rating, body.comment)
        except record.NotFound as exc:
            raise ApiError(404, str(exc), "not_found_error", "unknown_id", "id") from None
        # Explicit feedback needs no judge: its signal and sample are written now.
        made = feedback_signal(d.store, d.settings, body.id)
        remembered = []
        if body.comment and d.settings.memory:
            remembered = await asyncio.to_thread(_remember_comment, d, body.id, body.comment)
        sample = d.store.db.execute(
            "SELECT x.id, x.kind, x.status FROM samples x JOIN signals s ON s.id = x.signal_id "
            "WHERE s.turn_id = ?",
            [body.id],
        ).fetchone()
        return {
            "id": fid,
            "object": "feedback",
            "response_id": body.id,
            "signal": bool(made),
            "sample": dict(zip(("id", "kind", "status"), sample, strict=True)) if sample else None,
            "remembered": remembered,
        }

    @app.get("/v1/conversations", summary="Stored conversations, newest first")
    async def conversations(d: Daemon = Depends(authorize)) -> dict:
        return {"object": "list", "data": record.list_conversations(d.store)}

    @app.get("/v1/conversations/{cid}", summary="A conversation with its turns")
    async def conversation(cid: str, d: Daemon = Depends(authorize)) -> dict:
        return record.get_conversation(d.store, cid)

    @app.patch("/v1/conversations/{cid}", summary="Rename, or switch learning off or on")
    async def patch_conversation(
        cid: str, body: ConversationUpdate, d: Daemon = Depends(authorize)
    ) -> dict:
        record.update_conversation(d.store, cid, learn=body.learn, title=body.title)
        return record.get_conversation(d.store, cid)

    @app.delete("/v1/conversations/{cid}", summary="Forget a conversation")
    def delete(cid: str, d: Daemon = Depends(authorize)) -> dict:
        # a plain def: FastAPI runs it in a worker thread, so rewriting reports and the WAL
        # checkpoint (up to seconds) never stall the streams on the event loop
        made = memories.of_conversation(d.store, cid)
        removed = record.delete_conversation(d.store, cid)
        memories.delete(d.store, made)
        removed["memories"] = len(made)
        removed["reports"] = registry.scrub_reports(d.home, removed.pop("sample_ids"))
        d.store.event("forget", f"deleted conversation {cid}", removed=removed)
        return {"id": cid, "object": "conversation.deleted", "deleted": True, "removed": removed}

    @app.get("/v1/signals", summary="Learning signals, newest first")
    async def signals(
        status: str | None = None,
        limit: int = Query(50, ge=1, le=1000),
        d: Daemon = Depends(authorize),
    ) -> dict:
        if status not in (None, "pending", "approved", "vetoed", "used", "dropped"):
            raise ApiError(
                400,
                "status must be pending, approved, vetoed, used or dropped",
                "invalid_request_error",
                "invalid_value",
                "status",
            )
        return {"object": "list", "data": review.list_signals(d.store, status, limit)}

    @app.get("/v1/signals/{sid}", summary="A signal with its votes and sample")
    async def signal(sid: int = SignalId, d: Daemon = Depends(authorize)) -> dict:
        return review.show_signal(d.store, sid)

    async def _set(sid: int, status: str, d: Daemon) -> dict:
        try:
            return review.set_status(d.store, sid, status)
        except review.ReviewError as exc:
            raise ApiError(409, str(exc), "invalid_request_error", "not_applicable") from None

    @app.post("/v1/signals/{sid}/approve", summary="Let this signal's sample train")
    async def approve(sid: int = SignalId, d: Daemon = Depends(authorize)) -> dict:
        return await _set(sid, "approved", d)

    @app.post("/v1/signals/{sid}/veto", summary="Never train on this signal's sample")
    async def veto(sid: int = SignalId, d: Daemon = Depends(authorize)) -> dict:
        return await _set(sid, "vetoed", d)

    @app.get("/v1/train", summary="Training runs, the latest run's steps, the schedule")
    async def train_status(d: Daemon = Depends(authorize)) -> dict:
        return training_status(d.store, d.jobs, d.settings.train_method)

    @app.post("/v1/train", summary="Start a training run now", status_code=202)
    async def train_now(d: Daemon = Depends(authorize)) -> dict:
        d.require_ready()
        if d.jobs is None:
            why = d.jobs_error or "the daemon's jobs are not running"
            raise ApiError(503, why, "service_unavailable", "jobs_not_running")
        method = d.settings.train_method
        job = d.jobs.signal_job
        if job is not None:  # "reply, then train now" trains on that reply
            await run_in_threadpool(job.run_once, 1000, True)
        why = why_no_run(d.store, method, d.settings.train_replay, d.model_sha256)
        if why:
            raise ApiError(409, why, "invalid_request_error", "nothing_to_train")
        try:
            pid = d.jobs.start_training("api")
        except TrainerNotStarted as exc:
            raise ApiError(503, str(exc), "service_unavailable", "trainer_not_started") from None
        if pid is None:
            who = trainlock.holder(d.home)
            raise ApiError(
                409,
                "a training run is already in progress" + (f" ({who})" if who else ""),
                "invalid_request_error",
                "already_running",
            )
        return {"status": "started", "pid": pid}

    app.include_router(chat_router, dependencies=[Depends(authorize)])
    app.include_router(adapter_router, dependencies=[Depends(authorize)])
    app.include_router(memory_router, dependencies=[Depends(authorize)])
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
