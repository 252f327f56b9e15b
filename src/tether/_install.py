"""What to install for an optional part, said in a form that works today.

The distribution is not on a package index yet (docs/releases.md), so an error that said
``pip install 'tether[postgres]'`` sent people to another project (``tether`` on PyPI is not
ours). Each hint names the extra and the packages it stands for, which install from anywhere.
:data:`EXTRAS` mirrors ``[project.optional-dependencies]`` in pyproject.toml (a test holds them
equal).
"""

from __future__ import annotations

#: extra -> its requirements, exactly as in pyproject.toml.
EXTRAS: dict[str, tuple[str, ...]] = {
    "postgres": ("psycopg[binary]>=3.2",),
    "redis": ("redis[hiredis]>=5.0",),
    "cli": ("rich>=13",),
    "metrics": ("prometheus_client>=0.20",),
    "otel": ("opentelemetry-api>=1.20",),
    "dashboard": ("starlette>=0.37", "uvicorn>=0.29", "jinja2>=3.1", "python-multipart>=0.0.9"),
    "django": ("django>=4.2",),
    "fastapi": ("fastapi>=0.110",),
    "server": ("grpcio>=1.85.1", "protobuf>=7.35.1"),
}


def install_hint(extra: str) -> str:
    """``the postgres extra: pip install 'psycopg[binary]>=3.2'`` (one line)."""
    packages = " ".join(f"'{p}'" for p in EXTRAS[extra])
    return f"the {extra} extra: pip install {packages}"


__all__ = ["EXTRAS", "install_hint"]
