"""The dashboard's Starlette application: pages (GET), their JSON twins under ``/api``, and
actions (POST, CSRF-checked, for pages and API alike).

Handlers are plain functions, which Starlette runs on its thread pool: the store calls are
blocking, and every store is thread-safe. One store is opened for the application's lifetime.
Every page's figures come from one function that both the page and its ``/api`` twin call,
so the two never disagree.
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
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from tether import __version__
from tether import _limits as limits
from tether._cli.common import when_arg
from tether._cli.render import iso, seconds, when
from tether._config import Settings
from tether._errors import JobNotFound, TetherError
from tether._flowview import Declared
from tether.dashboard import _bulk as bulk
from tether.dashboard import _charts as charts
from tether.dashboard import _data as data
from tether.dashboard import _json as api
from tether.dashboard._history import DEFAULT_WINDOW, WINDOWS, history
from tether.dashboard._scan import Selection, scan
from tether.dashboard._security import Auth, check_post, csrf_token, set_csrf_cookie
from tether.dashboard._workers import workers_view
from tether.stores._contract import STATUSES, Admin, JobFilter, JobStatus

PAGE = 50
HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=str(HERE / "templates"))
TEMPLATES.env.filters.update(when=when, ago=seconds, iso=iso)
LIVE_JS = (HERE / "static" / "live.js").read_text()


def _status(text: str | None) -> JobStatus | None:
    return text if text in STATUSES else None


class Refused(Exception):
    """A request the API answers with an error status and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def selection(request: Request) -> tuple[Selection, str]:
    """The job selection a page or API call names in its query; Refused(400) when unreadable."""
    q = request.query_params
    since_text = q.get("since", "").strip()
    try:
        since = when_arg(since_text) if since_text else None
    except (ValueError, TypeError, ArgumentTypeError) as exc:
        raise Refused(400, str(exc)) from exc
    return Selection.from_params(q, since), since_text


def job_page(store: Admin, request: Request) -> dict[str, Any]:
    """One page of the jobs the query selects, newest first (``/jobs``, ``/api/jobs``)."""
    sel, since_text = selection(request)
    q = request.query_params
    try:
        cursor = limits.check_job_id(int(q["cursor"])) if q.get("cursor") else None
    except (ValueError, TypeError) as exc:
        raise Refused(400, str(exc)) from exc
    found = scan(store, sel, cursor=cursor, want=PAGE)
    keep = {k: v for k, v in q.items() if k not in ("cursor", "note") and v}
    return {"jobs": found.jobs, "sel": sel, "since": since_text, "examined": found.examined,
            "cursor": found.more, "more": urlencode({**keep, "cursor": found.more})
            if found.more is not None else None,
            "first": urlencode(keep) if cursor else None, "query": urlencode(keep)}


def history_page(store: Admin, request: Request) -> dict[str, Any]:
    sel, _ = selection(request)
    window = request.query_params.get("window") or DEFAULT_WINDOW
    if window not in WINDOWS:
        raise Refused(400, f"window: one of {', '.join(WINDOWS)}")
    return {"history": history(store, store.now(), window, sel), "window": window,
            "sel": sel}


#: Queues, and tasks, the history page draws at most (the busiest; the API has them all).
CHARTED = 12


def busy(groups: dict[str, Any]) -> list[str]:
    """The names of the :data:`CHARTED` busiest groups (most finished, then most started),
    in name order: a page of hundreds of tasks' charts would be unreadable and slow."""
    ranked = sorted(groups, key=lambda k: (-sum(groups[k].done) - sum(groups[k].failed),
                                           -sum(groups[k].started), k))
    return sorted(ranked[:CHARTED])


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

    def answer(request: Request, body: Any, status: int = 200) -> Response:
        return set_csrf_cookie(request, JSONResponse(body, status))

    def refused_page(exc: Refused) -> Response:
        return PlainTextResponse(str(exc), exc.status)

    def overview(request: Request) -> Response:
        return page(request, "overview.html", **data.overview(store(), settings, rates, flow))

    def api_overview(request: Request) -> Response:
        return answer(request, api.overview(data.overview(store(), settings, rates, flow)))

    def jobs(request: Request) -> Response:
        try:
            found = job_page(store(), request)
        except Refused as exc:
            sel = Selection.from_params(request.query_params)  # keep the filters shown
            found = {"jobs": [], "sel": sel, "since": request.query_params.get("since", ""),
                     "error": str(exc), "more": None, "first": None, "examined": 0,
                     "query": ""}
        return page(request, "jobs.html", **found)

    def api_jobs(request: Request) -> Response:
        try:
            found = job_page(store(), request)
        except Refused as exc:
            return answer(request, {"error": str(exc)}, exc.status)
        return answer(request, {"jobs": [api.job_summary(j) for j in found["jobs"]],
                                "next_cursor": found["cursor"],
                                "examined": found["examined"]})

    def one_job(request: Request) -> Any:
        try:
            job_id = limits.check_job_id(int(request.path_params["id"]))
        except ValueError as exc:
            raise Refused(404, "not a job id") from exc
        found = store().get_job(job_id)
        if found is None:
            raise Refused(404, f"no job with id {job_id}")
        return found

    def job(request: Request) -> Response:
        try:
            found = one_job(request)
        except Refused as exc:
            return refused_page(exc)
        return page(request, "job.html", **data.job_view(found),
                    **data.links_view(store(), found))

    def api_job(request: Request) -> Response:
        try:
            found = one_job(request)
        except Refused as exc:
            return answer(request, {"error": str(exc)}, exc.status)
        try:
            links = store().job_links(found.id)
        except JobNotFound:  # pruned between the two reads
            return answer(request, {"error": f"no job with id {found.id}"}, 404)
        return answer(request, {**api.job_detail(found), "parents": list(links.parents),
                                "children": list(links.children)})

    def history_html(request: Request) -> Response:
        try:
            view = history_page(store(), request)
        except Refused as exc:
            return refused_page(exc)
        h = view["history"]
        def chart(name: str, series: Any) -> dict[str, str]:
            return {
                "throughput": charts.bars(f"throughput-{name}", f"jobs finished: {name}",
                                          h.buckets, {"done": series.done,
                                                      "failed": series.failed}),
                "depth": charts.lines(f"depth-{name}", f"jobs waiting: {name}", h.buckets,
                                      {"depth": series.depth}),
                "wait": charts.lines(f"wait-{name}", f"wait before start: {name}",
                                     h.buckets, {"wait_avg": series.wait_avg,
                                                 "wait_max": series.wait_max}, unit="s")}
        groups = [("all", "all jobs", h.all)]
        busiest = {"queue": busy(h.queues), "task": busy(h.tasks)}
        groups += [(f"queue-{q}", f"queue {q}", h.queues[q]) for q in busiest["queue"]]
        groups += [(f"task-{t}", f"task {t}", h.tasks[t]) for t in busiest["task"]]
        drawn = [{"key": key, "label": label, "done": sum(s.done), "failed": sum(s.failed),
                  **chart(key, s)} for key, label, s in groups]
        hidden = len(h.queues) + len(h.tasks) - len(groups) + 1
        return page(request, "history.html", drawn=drawn, windows=list(WINDOWS),
                    hidden=hidden, **view)

    def api_history(request: Request) -> Response:
        try:
            view = history_page(store(), request)
        except Refused as exc:
            return answer(request, {"error": str(exc)}, exc.status)
        return answer(request, {"window": view["window"], **view["history"].json()})

    def workers(request: Request) -> Response:
        return page(request, "workers.html", workers=workers_view(store(), settings),
                    now=store().now())

    def api_workers(request: Request) -> Response:
        return answer(request, {"workers": workers_view(store(), settings)})

    def bulk_preview(request: Request) -> tuple[bulk.Preview, Selection, str]:
        sel, since_text = selection(request)
        action = request.query_params.get("action", "")
        return bulk.preview(store(), action, sel), sel, since_text

    def bulk_page(request: Request) -> Response:
        try:
            found, sel, since_text = bulk_preview(request)
        except Refused as exc:
            return refused_page(exc)
        keep = {k: v for k, v in request.query_params.items() if k != "action" and v}
        return page(request, "bulk.html", preview=found, sel=sel, since=since_text,
                    query=urlencode(keep))

    def api_bulk_preview(request: Request) -> Response:
        try:
            found, _, _ = bulk_preview(request)
        except Refused as exc:
            return answer(request, {"error": str(exc)}, exc.status)
        return answer(request, found.json(), 400 if found.refused else 200)

    def api_csrf(request: Request) -> Response:
        return answer(request, {"csrf": csrf_token(request)})

    async def checked(request: Request) -> Response | None:
        if read_only:
            return PlainTextResponse("this dashboard is read-only", 403)
        refused = await check_post(request)
        return PlainTextResponse(refused, 403) if refused else None

    def bulk_run(form: Any) -> str:
        action = str(form.get("action") or "")
        if action not in bulk.ACTIONS:
            raise ValueError(f"unknown bulk action {action!r}")
        try:
            ids = [limits.check_job_id(int(i)) for i in str(form.get("ids") or "").split(",")
                   if i.strip()]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"ids: {exc}") from exc
        since = form.get("since")
        sel = Selection.from_params(form, float(str(since)) if since else None)
        return bulk.run(store(), action, ids, sel)

    async def action(request: Request) -> Response:
        refused = await checked(request)
        if refused:
            return refused
        form = await request.form()
        what = request.path_params["what"]
        back = str(form.get("back") or "/")
        if not back.startswith("/") or back.startswith("//"):
            back = "/"
        try:
            if what == "bulk":
                note = bulk_run(form)
            else:
                note = run_action(store(), what, request.path_params.get("target", ""), form)
        except (TetherError, ValueError) as exc:
            if isinstance(exc, JobNotFound):
                return PlainTextResponse(str(exc), 404)
            return PlainTextResponse(f"refused: {exc}", 400)
        sep = "&" if "?" in back else "?"
        return RedirectResponse(f"{back}{sep}{urlencode({'note': note})}", 303)

    async def api_action(request: Request) -> Response:
        refused = await checked(request)
        if refused:
            return answer(request, {"error": bytes(refused.body).decode()},
                          refused.status_code)
        form = await request.form()
        what = request.path_params["what"]
        try:
            if what == "bulk":
                note = bulk_run(form)
            else:
                note = run_action(store(), what, request.path_params.get("target", ""), form)
        except (TetherError, ValueError) as exc:
            status = 404 if isinstance(exc, JobNotFound) else 400
            return answer(request, {"error": str(exc)}, status)
        return answer(request, {"note": note})

    def live_js(_request: Request) -> Response:
        return Response(LIVE_JS, media_type="text/javascript",
                        headers={"Cache-Control": "max-age=300"})

    def healthz(_request: Request) -> Response:
        store().now()
        return PlainTextResponse("ok")

    routes = [
        Route("/", overview), Route("/jobs", jobs), Route("/jobs/{id}", job),
        Route("/history", history_html), Route("/workers", workers),
        Route("/bulk", bulk_page), Route("/static/live.js", live_js),
        Route("/healthz", healthz),
        Route("/act/{what}/{target}", action, methods=["POST"]),
        Route("/act/{what}", action, methods=["POST"]),
        Route("/api/overview", api_overview), Route("/api/jobs", api_jobs),
        Route("/api/jobs/{id}", api_job), Route("/api/history", api_history),
        Route("/api/workers", api_workers), Route("/api/bulk", api_bulk_preview),
        Route("/api/csrf", api_csrf),
        Route("/api/act/{what}/{target}", api_action, methods=["POST"]),
        Route("/api/act/{what}", api_action, methods=["POST"]),
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
