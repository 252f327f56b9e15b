"""The dashboard's Starlette application: pages (GET) and actions (POST, CSRF-checked).

Handlers are plain functions, which Starlette runs on its thread pool: the store calls are
blocking, and every store is thread-safe. One store is opened for the application's lifetime.
"""

from __future__ import annotations

import contextlib
from argparse import ArgumentTypeError
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from tether import __version__
from tether import _limits as limits
from tether._cli.common import when_arg
from tether._cli.render import iso, seconds, when
from tether._config import Settings
from tether._errors import JobNotFound, TetherError
from tether._flowview import Declared
from tether.dashboard import _data as data
from tether.dashboard._security import Auth, check_post, csrf_token, set_csrf_cookie
from tether.stores._contract import STATUSES, Admin, JobFilter, JobStatus

PAGE = 50
TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
TEMPLATES.env.filters.update(when=when, ago=seconds, iso=iso)


def _status(text: str | None) -> JobStatus | None:
    return text if text in STATUSES else None


def create_app(open_store: Callable[[], Admin], *, settings: Settings | None = None,
               read_only: bool = False, token: str | None = None,
               basic: str | None = None, flow: list[Declared] | None = None) -> Any:
    """The ASGI app; ``open_store`` is called once at start-up. ``flow``: the app's
    declared flow limits (``tether._flowview.declared``), shown on the overview; None when
    the app is not known."""
    settings = settings or Settings()
    rates = data.Rates()
    state: dict[str, Admin] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        state["store"] = open_store()
        try:
            yield
        finally:
            state.pop("store").close()

    def store() -> Admin:
        if "store" not in state:  # a test client without lifespan
            state["store"] = open_store()
        return state["store"]

    def page(request: Request, name: str, **context: Any) -> Response:
        context.update(request=request, read_only=read_only, csrf=csrf_token(request),
                       version=__version__, statuses=STATUSES)
        return set_csrf_cookie(request, TEMPLATES.TemplateResponse(request, name, context))

    def overview(request: Request) -> Response:
        return page(request, "overview.html", **data.overview(store(), settings, rates, flow))

    def jobs(request: Request) -> Response:
        q = request.query_params
        since_text = q.get("since", "").strip()
        error = None
        since = None
        try:
            since = when_arg(since_text) if since_text else None
            cursor = limits.check_job_id(int(q["cursor"])) if q.get("cursor") else None
        except (ValueError, TypeError, ArgumentTypeError) as exc:
            error, cursor = str(exc), None
        filt = JobFilter(status=_status(q.get("status")), queue=q.get("queue") or None,
                         task=q.get("task") or None, since=since)
        found = [] if error else store().search_jobs(filt, cursor=cursor, limit=PAGE)
        keep = {k: v for k, v in q.items() if k != "cursor" and v}
        more = urlencode({**keep, "cursor": found[-1].id}) if len(found) == PAGE else None
        return page(request, "jobs.html", jobs=found, filt=filt, since=since_text, error=error,
                    more=more, first=urlencode(keep) if cursor else None)

    def job(request: Request) -> Response:
        try:
            job_id = limits.check_job_id(int(request.path_params["id"]))
        except ValueError:
            return PlainTextResponse("not a job id", 404)
        found = store().get_job(job_id)
        if found is None:
            return PlainTextResponse(f"no job with id {job_id}", 404)
        return page(request, "job.html", **data.job_view(found),
                    **data.links_view(store(), found))

    async def action(request: Request) -> Response:
        if read_only:
            return PlainTextResponse("this dashboard is read-only", 403)
        refused = await check_post(request)
        if refused:
            return PlainTextResponse(refused, 403)
        form = await request.form()
        what = request.path_params["what"]
        back = str(form.get("back") or "/")
        if not back.startswith("/") or back.startswith("//"):
            back = "/"
        try:
            note = run_action(store(), what, request.path_params.get("target", ""), form)
        except (TetherError, ValueError) as exc:
            if isinstance(exc, JobNotFound):
                return PlainTextResponse(str(exc), 404)
            return PlainTextResponse(f"refused: {exc}", 400)
        sep = "&" if "?" in back else "?"
        return RedirectResponse(f"{back}{sep}{urlencode({'note': note})}", 303)

    def healthz(_request: Request) -> Response:
        store().now()
        return PlainTextResponse("ok")

    routes = [
        Route("/", overview), Route("/jobs", jobs), Route("/jobs/{id}", job),
        Route("/healthz", healthz),
        Route("/act/{what}/{target}", action, methods=["POST"]),
        Route("/act/{what}", action, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    return Auth(app, token, basic)


def run_action(store: Admin, what: str, target: str, form: Any) -> str:
    """Do one action; returns the note shown after the redirect."""
    if what == "retry":
        job_id = limits.check_job_id(int(target))
        if store.get_job(job_id) is None:
            raise JobNotFound(job_id)
        moved = store.retry_failed([job_id]).retried
        return f"job {job_id} retried" if moved else f"job {job_id} was not failed"
    if what == "retry-filtered":
        filt = JobFilter(status="failed", queue=str(form.get("queue") or "") or None,
                         task=str(form.get("task") or "") or None)
        ids = [j.id for j in store.search_jobs(filt, limit=limits.MAX_PAGE)]
        moved = store.retry_failed(ids).retried if ids else 0
        return f"retried {moved} failed job(s)"
    if what == "cancel":
        job_id = limits.check_job_id(int(target))
        return f"job {job_id}: {store.cancel(job_id)}"
    if what == "purge":
        statuses: list[JobStatus] = [s for s in STATUSES if form.get(f"s_{s}")]
        deleted = store.purge(target, statuses or ["pending"])
        return f"deleted {deleted} job(s) from {target}"
    if what == "pause":
        store.pause_queue(target)
        return f"queue {target} paused"
    if what == "resume":
        store.resume_queue(target)
        return f"queue {target} resumed"
    raise ValueError(f"unknown action {what!r}")
