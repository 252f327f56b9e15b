"""Run inside the example Django project (cwd ``examples/django_app``) by the tests: drives the
views with Django's test client and reports, as one JSON line, what it saw of the rows and the
jobs at each step. A separate process, because Django's settings are once per process and each
test has its own database.

``django_driver.py requests``: the views and enqueue inside transactions.
``django_driver.py atomic``: ``atomic_job()`` with a live and with a lost lease.
``django_driver.py modes``: the mode each ``TETHER["transaction"]`` value gives here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")

import django

django.setup()

from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.db import transaction  # noqa: E402
from django.test import Client  # noqa: E402
from shop.models import Order  # type: ignore[import-not-found]  # noqa: E402
from shop.tasks import send_receipt  # type: ignore[import-not-found]  # noqa: E402

from tether._context import JobContext, bind, unbind  # noqa: E402
from tether._errors import LeaseLost  # noqa: E402
from tether.contrib.django import atomic_job, enqueue, get_app, get_config, holder, mode, producing  # noqa: E402  # noqa: E402


def requests() -> dict[str, object]:
    app = get_app()
    store = app.store
    seen: dict[str, object] = {"mode": mode(app)}
    client = Client(raise_request_exception=False)

    response = client.post("/orders/", {"item": "book"})
    seen["ok_status"] = response.status_code
    seen["ok_body"] = response.json()

    jobs_before = len(store.list_jobs(limit=1000))
    orders_before = Order.objects.count()
    failing = client.post("/orders/failing/", {"item": "lamp"})
    seen["failing_status"] = failing.status_code
    seen["failing_new_orders"] = Order.objects.count() - orders_before
    seen["failing_new_jobs"] = len(store.list_jobs(limit=1000)) - jobs_before

    # A savepoint rolled back inside a committed transaction takes its job with it.
    with transaction.atomic():
        try:
            with transaction.atomic():
                enqueue(send_receipt, -1)
                raise RuntimeError("inner block fails")
        except RuntimeError:
            pass
    seen["savepoint_new_jobs"] = len(store.list_jobs(limit=1000)) - jobs_before

    # Inside the transaction: the job is not visible to anyone else before the commit.
    with transaction.atomic():
        order = Order.objects.create(item="pen")
        job_id = enqueue(send_receipt, order.id)
        seen["inside_id"] = job_id
        seen["inside_visible"] = (store.get_job(job_id) is not None if job_id is not None
                                  else len(store.list_jobs(limit=1000)) > jobs_before)
    after = store.list_jobs(limit=1000)
    seen["after_commit_jobs"] = len(after) - jobs_before
    seen["pen_order"] = order.id
    return seen


def _attempt(queue: str, receipt: str, order_id: int, *, lose_lease: bool) -> dict[str, object]:
    """Claim the queue's job as a worker would, run ``atomic_job()`` writing ``receipt``;
    with ``lose_lease`` the reaper takes the lease back first (as after a long pause)."""
    store = get_app().store
    (job,) = store.claim("driver", [queue], 1, 30)
    if lose_lease:
        store.reap_expired(now=time.time() + 3600)
    token = bind(JobContext(job, store))
    outcome: dict[str, object] = {"lease_lost": False}
    try:
        with atomic_job() as joined:
            outcome["joined"] = joined
            Order.objects.filter(id=order_id).update(receipt=receipt)
    except LeaseLost:
        outcome["lease_lost"] = True
    finally:
        unbind(token)
    outcome["receipt"] = Order.objects.get(id=order_id).receipt
    after = store.get_job(job.id)
    outcome["status"] = after.status if after else None
    return outcome


def atomic() -> dict[str, object]:
    order = Order.objects.create(item="mug")
    send_receipt.enqueue_with((order.id,), queue="atomic")
    return {"stale": _attempt("atomic", "stale write", order.id, lose_lease=True),
            "live": _attempt("atomic", "live write", order.id, lose_lease=False)}


def modes() -> dict[str, object]:
    """Each ``transaction`` setting in turn (the settings are read once per process, so the
    checked value is replaced as a test would with override_settings)."""
    app, seen = get_app(), {}
    original = get_config()
    for setting in ("auto", "connection", "on_commit"):
        holder._Made.config = dataclasses.replace(original, transaction=setting)
        producing._mode.cache_clear()
        try:
            seen[setting] = mode(app)
        except ImproperlyConfigured as exc:
            seen[setting] = f"ImproperlyConfigured: {exc}"
    # tether's PostgreSQL store on another database than Django's: auto falls back to
    # on_commit; an explicit "connection" is refused (Django's connection would write the job
    # into a database no worker reads).
    elsewhere = "postgresql://postgres@127.0.0.1:5432/another_db?schema=tether"
    for setting in ("auto", "connection"):
        holder._Made.config = dataclasses.replace(original, url=elsewhere, derived=False,
                                                  transaction=setting)
        producing._mode.cache_clear()
        try:
            seen[f"elsewhere_{setting}"] = producing._mode(elsewhere, original.database)
        except ImproperlyConfigured as exc:
            seen[f"elsewhere_{setting}"] = f"ImproperlyConfigured: {exc}"
    # Django on psycopg2 (its connection cannot take tether's psycopg 3 statements): auto
    # falls back to on_commit, and the warning says why.
    import logging

    warnings: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("tether.django").addHandler(handler)
    holder._Made.config = dataclasses.replace(original, transaction="auto")
    real, producing._psycopg3 = producing._psycopg3, lambda: False
    producing._mode.cache_clear()
    try:
        seen["psycopg2_auto"] = producing._mode(app.runtime.url, original.database)
    finally:
        producing._psycopg3 = real
        logging.getLogger("tether.django").removeHandler(handler)
    seen["psycopg2_warnings"] = warnings
    # on_commit chosen on PostgreSQL too: no id inside the transaction, the job after it.
    holder._Made.config = dataclasses.replace(original, transaction="on_commit")
    producing._mode.cache_clear()
    before = len(app.store.list_jobs(limit=1000))
    with transaction.atomic():
        order = Order.objects.create(item="cup")
        seen["on_commit_id"] = enqueue(send_receipt, order.id)
        seen["on_commit_inside"] = len(app.store.list_jobs(limit=1000)) - before
    seen["on_commit_after"] = len(app.store.list_jobs(limit=1000)) - before
    return seen


print(json.dumps({"requests": requests, "atomic": atomic, "modes": modes}[sys.argv[1]]()))
