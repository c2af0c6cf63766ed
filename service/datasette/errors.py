"""Datasette's errors, answered without 5xx for anything a client can cause.

Datasette 0.65's own ``handle_exception`` hook has two faults a client can
trigger at will. It calls ``rich.get_console().print_exception()`` whenever
`rich <https://rich.readthedocs.io>`_ is importable, and that raises when no
exception is being handled (every 404 it renders outside an ``except``
block, such as ``/a/b/c/d/e/f/g`` or ``//x``), so the 404 becomes a 500 with
a traceback in the log. And a ``DatasetteError`` keeps its default status
500 for bad requests (``?_sort=nope`` raises "Cannot sort table by nope").

:func:`handle_exception` replaces the answer of every other implementation
of the hook (a *wrapper* in pluggy's terms, so it sees and discards theirs,
closing the coroutines they returned unawaited): Datasette's 4xx exceptions
and every ``DatasetteError`` are answered as the 4xx they are, in Datasette's
own shape (JSON for ``.json`` paths, its error page otherwise); anything else
is logged with its traceback and answered as a plain 500 that names nothing
internal.
"""

from __future__ import annotations

import inspect
import logging

from datasette import Response, hookimpl
from datasette.utils.asgi import Base400
from datasette.views.base import DatasetteError
from markupsafe import Markup

log = logging.getLogger("qsite.errors")

#: What a client is told about a fault of the service itself.
INTERNAL_ERROR = "Internal error: the request could not be answered"


def error_status(exception: BaseException) -> int:
    """The status to answer ``exception`` with: its own 4xx, 400 for a DatasetteError marked 5xx, else 500."""
    if isinstance(exception, Base400):
        return exception.status
    if isinstance(exception, DatasetteError):
        # Datasette raises these for what the request asked (a column that does not
        # exist, SQL that does not run, a database that is not there); its default
        # status of 500 says the service failed when the request did.
        return exception.status if 400 <= exception.status < 500 else 400
    return 500


def error_info(exception: BaseException, status: int) -> dict:
    """Datasette's error fields (``ok``, ``error``, ``status``, ``title``) for ``exception``."""
    title = None
    message: str = INTERNAL_ERROR
    info: dict = {}
    if isinstance(exception, Base400):
        message = str(exception.args[0]) if exception.args else str(status)
    elif isinstance(exception, DatasetteError):
        info = dict(exception.error_dict or {})
        message = Markup(exception.message) if exception.message_is_html else exception.message
        title = exception.title
    return {**info, "ok": False, "error": message, "status": status, "title": title}


async def error_response(datasette, request, exception: BaseException) -> Response:
    status = error_status(exception)
    if status >= 500:
        log.error(
            "error answering %s %s",
            request.method,
            request.path,
            exc_info=(type(exception), exception, exception.__traceback__),
        )
    info = error_info(exception, status)
    if request.path.endswith(".json"):
        return Response.json(info, status=status)
    try:
        template = datasette.jinja_env.select_template([f"{status}.html", "error.html"])
        page = await template.render_async(
            dict(info, urls=datasette.urls, app_css_hash=datasette.app_css_hash(), menu_links=lambda: [])
        )
    except Exception:  # the error page itself failed: say as little, plainly
        log.exception("error page for %s %s", request.method, request.path)
        return Response.text(str(info["error"]), status=status)
    return Response.html(page, status=status)


@hookimpl(wrapper=True)
def handle_exception(datasette, request, exception):
    """Every exception Datasette's router did not answer itself: the one answer sent."""
    others = yield
    for answer in others or ():
        if inspect.iscoroutine(answer):
            answer.close()  # never awaited: Datasette's would print with rich and fail
    return [error_response(datasette, request, exception)]
