"""The tether server CLI's and auth tests use the server fixtures of tests/service."""

from tests.service.conftest import ADMIN_TOKEN, WORKER_TOKEN, backing, remote, serve

__all__ = ["ADMIN_TOKEN", "WORKER_TOKEN", "backing", "remote", "serve"]
