"""``settings.TETHER`` read into one checked value, and the store URL it implies.

Kept free of Django's runtime (it takes the settings' values, not the settings object) so a
bad setting is refused the same way at start-up, in a worker and in a unit test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from tether.stores._urls import take_param

#: How ``tether.contrib.django.enqueue`` joins a Django transaction (see docs/django.md).
MODES = ("auto", "connection", "on_commit")
#: Keys of ``settings.TETHER`` that belong to the integration; every other key is an option
#: of :class:`tether.App` (``lease_ttl``, ``auto_migrate``, ...).
OWN_KEYS = frozenset({"url", "database", "transaction", "include", "autodiscover", "schema"})
_POSTGRES_ENGINES = ("django.db.backends.postgresql", "django.contrib.gis.db.backends.postgis")
_LOCAL_HOSTS = frozenset({"", "localhost", "127.0.0.1", "::1"})


class SettingsError(ValueError):
    """A wrong ``settings.TETHER``; turned into Django's ImproperlyConfigured by the caller."""


@dataclass(frozen=True)
class Config:
    url: str | None
    database: str = "default"
    transaction: str = "auto"
    include: tuple[str, ...] = ()
    autodiscover: bool = False
    #: True when ``url`` was built from ``DATABASES[database]``: the same database, so the
    #: job can be written on Django's own connection.
    derived: bool = False
    options: dict[str, Any] = field(default_factory=dict)


def read(tether: Mapping[str, Any] | None, tether_url: str | None,
         databases: Mapping[str, Mapping[str, Any]], environ: Mapping[str, str]) -> Config:
    """``settings.TETHER`` (and ``settings.TETHER_URL``) as a :class:`Config`.

    The store URL is, in order: ``TETHER["url"]``, ``settings.TETHER_URL``, ``$TETHER_URL``,
    else built from ``DATABASES[database]`` when that is PostgreSQL (schema ``TETHER["schema"]``,
    default ``tether``), else None (tether's default, an SQLite file).
    """
    if not isinstance(tether or {}, Mapping):
        raise SettingsError(f"settings.TETHER must be a dict, got {type(tether).__name__}")
    given = dict(tether or {})
    options = {k: v for k, v in given.items() if k not in OWN_KEYS}
    database = given.get("database", "default")
    if not isinstance(database, str) or database not in databases:
        raise SettingsError(f"TETHER['database'] = {database!r} is not in settings.DATABASES")
    mode = given.get("transaction", "auto")
    if mode not in MODES:
        raise SettingsError(f"TETHER['transaction'] must be one of {', '.join(MODES)}, "
                            f"got {mode!r}")
    include = given.get("include", ())
    if not isinstance(include, list | tuple) or not all(isinstance(m, str) for m in include):
        raise SettingsError(f"TETHER['include'] must be a list of module names, got "
                            f"{include!r}")
    autodiscover = given.get("autodiscover", False)
    if not isinstance(autodiscover, bool):
        raise SettingsError(f"TETHER['autodiscover'] must be True or False, got "
                            f"{autodiscover!r}")
    schema = given.get("schema")
    if schema is not None and not (isinstance(schema, str) and schema):
        raise SettingsError(f"TETHER['schema'] must be a schema name, got {schema!r}")
    url = given.get("url") or tether_url or environ.get("TETHER_URL") or None
    derived = False
    if url is None:
        url = postgres_url(databases[database], schema or "tether")
        derived = url is not None
        if url is None and schema is not None:  # a setting that would silently do nothing
            raise SettingsError(f"TETHER['schema'] is for the URL built from a PostgreSQL "
                                f"DATABASES[{database!r}], which is not PostgreSQL here")
    elif schema is not None:
        raise SettingsError("TETHER['schema'] is for the URL built from DATABASES; with "
                            "TETHER['url'] put it in the URL (?schema=...)")
    if url is not None and not isinstance(url, str):
        raise SettingsError(f"the tether URL must be a string, got {type(url).__name__}")
    return Config(url=url, database=database, transaction=mode, include=tuple(include),
                  autodiscover=autodiscover, derived=derived,
                  options=options)


def is_postgres(db: Mapping[str, Any]) -> bool:
    return str(db.get("ENGINE", "")) in _POSTGRES_ENGINES


def postgres_url(db: Mapping[str, Any], schema: str) -> str | None:
    """A tether URL for the database Django's ``DATABASES`` entry names (None unless it is
    PostgreSQL). The password goes into the URL; tether redacts it wherever it shows one."""
    if not is_postgres(db) or not db.get("NAME"):
        return None
    user = quote(str(db.get("USER") or ""), safe="")
    password = quote(str(db.get("PASSWORD") or ""), safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = str(db.get("HOST") or "")
    query = f"schema={schema}"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    if host.startswith("/"):  # a Unix socket directory: libpq takes it (and the port) as
        query += f"&host={quote(host, safe='')}"  # parameters of a URL with no host
        query += f"&port={db['PORT']}" if port else ""
        host = port = ""
    elif ":" in host:
        host = f"[{host}]"
    sslmode = (db.get("OPTIONS") or {}).get("sslmode")
    if sslmode:
        query += f"&sslmode={quote(str(sslmode), safe='')}"
    return f"postgresql://{auth}{host}{port}/{quote(str(db['NAME']), safe='')}?{query}"


def same_database(url: str, db: Mapping[str, Any]) -> bool:
    """Whether a PostgreSQL tether URL names the database of a Django ``DATABASES`` entry
    (same host, port and database name; the local spellings of the host count as one)."""
    parts = urlsplit(take_param(url, "schema")[0])
    if parts.scheme not in ("postgresql", "postgres") or not is_postgres(db):
        return False

    def local(host: str) -> str:
        return "local" if host in _LOCAL_HOSTS or host.startswith("/") else host

    return (local(parts.hostname or "") == local(str(db.get("HOST") or ""))
            and (parts.port or 5432) == int(db.get("PORT") or 5432)
            and parts.path.lstrip("/") == str(db.get("NAME") or ""))
