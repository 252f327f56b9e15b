"""What a process does to the store's schema when it opens the store (issue #24).

Rolling deploys run workers of release N and N+1 on one store. A worker that upgraded the
schema when it started would change it under the older workers still running, so the default
(``auto_migrate=None``) only **creates** a schema where there is none (a store without a schema
has no workers to break) and otherwise **checks** it: an older schema is refused with one line
naming ``tether migrate``, the deploy step (docs/upgrading.md). ``auto_migrate=True`` also
upgrades (one process, development); ``False`` only checks (a missing schema is refused too).

Only the :class:`~tether.stores._roles.Lifecycle` role is used (``info``, ``migrate``,
``check_schema``), so this holds on every store, ``tether://`` included.
"""

from __future__ import annotations

from typing import Literal

from tether._errors import SchemaError
from tether.stores._contract import Store

#: ``create``: make a missing schema, check an existing one (the default);
#: ``upgrade``: create or upgrade (``auto_migrate=True``, ``tether migrate``);
#: ``check``: never write (``auto_migrate=False``, read commands).
SchemaStep = Literal["create", "upgrade", "check"]


def step_for(auto_migrate: bool | None) -> SchemaStep:
    """The step an app's ``auto_migrate`` asks for."""
    if auto_migrate is None:
        return "create"
    return "upgrade" if auto_migrate else "check"


def prepare_schema(store: Store, step: SchemaStep) -> None:
    """Bring the schema to what ``step`` allows, or raise SchemaError (one line).

    ``create`` checks first, so a store at this release's version costs what a plain check
    costs. Only when the check fails is the version read: 0 means no schema, which ``migrate``
    creates (two processes creating at once are safe: every store's ``migrate`` runs once under
    a lock); any other version keeps the check's error, which refuses an older schema ("run
    `tether migrate`") and a newer one ("upgrade tether") without writing.
    """
    if step == "upgrade":
        store.migrate()
        return
    try:
        store.check_schema()
    except SchemaError:
        if step == "create" and store.info().schema_version == 0:
            store.migrate()
            return
        raise


__all__ = ["SchemaStep", "prepare_schema", "step_for"]
