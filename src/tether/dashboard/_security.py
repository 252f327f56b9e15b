"""Who may see the dashboard and how its actions are protected.

* Authentication (optional; required by the CLI for any non-loopback bind): a bearer token
  (``Authorization: Bearer T``, or ``?token=T`` once, which sets a cookie so links keep working)
  or HTTP basic auth. Compared in constant time.
* CSRF: every action is a POST carrying a per-browser random token that must equal the value
  of a ``SameSite=Strict`` cookie (double-submit); the JSON API takes it in an
  ``X-CSRF-Token`` header as well (``GET /api/csrf`` hands it out with the cookie). A page on
  another origin can neither read the cookie nor make the browser send it, nor read the API's
  answers, so it cannot forge an action. Requests whose ``Origin``
  names another host are refused as well.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

CSRF_COOKIE = "tether_csrf"
TOKEN_COOKIE = "tether_token"
#: The JSON API's POSTs may carry the CSRF token in this header instead of a form field.
CSRF_HEADER = "x-csrf-token"


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class Auth:
    """ASGI middleware: token or basic auth in front of every route but /healthz."""

    def __init__(self, app: ASGIApp, token: str | None, basic: str | None) -> None:
        self.app = app
        self.token = token
        self.basic = basic

    def allowed(self, request: Request) -> bool:
        if self.token is None and self.basic is None:
            return True
        header = request.headers.get("authorization", "")
        if self.token is not None:
            if header.startswith("Bearer ") and same(header[7:], self.token):
                return True
            if same(request.cookies.get(TOKEN_COOKIE, ""), self.token):
                return True
        if self.basic is not None and header.startswith("Basic "):
            try:
                given = base64.b64decode(header[6:], validate=True).decode()
            except ValueError:
                return False
            return same(given, self.basic)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/healthz":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        query_token = request.query_params.get("token")
        if self.token is not None and query_token is not None and same(query_token, self.token):
            response: Response = RedirectResponse(request.url.remove_query_params("token"), 303)
            response.set_cookie(TOKEN_COOKIE, query_token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        if not self.allowed(request):
            headers = {"WWW-Authenticate": 'Basic realm="tether"'} if self.basic else {}
            await PlainTextResponse("authentication required", 401, headers)(scope, receive,
                                                                              send)
            return
        await self.app(scope, receive, send)


def csrf_token(request: Request) -> str:
    """The browser's token (made on first sight; the page sets the cookie)."""
    token = request.cookies.get(CSRF_COOKIE)
    if not token:
        token = request.state.__dict__.setdefault("new_csrf", secrets.token_urlsafe(24))
    return token


def set_csrf_cookie(request: Request, response: Response) -> Response:
    new = request.state.__dict__.get("new_csrf")
    if new:
        response.set_cookie(CSRF_COOKIE, new, httponly=True, samesite="strict")
    return response


async def check_post(request: Request) -> str | None:
    """None when the POST may proceed, else why not."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.url.netloc:
        return "cross-origin request refused"
    cookie = request.cookies.get(CSRF_COOKIE, "")
    given = request.headers.get(CSRF_HEADER) or str((await request.form()).get("csrf", ""))
    if not cookie or not given or not same(cookie, given):
        return "missing or wrong CSRF token: reload the page and try again"
    return None


Endpoint = Callable[[Request], Awaitable[Response]]
