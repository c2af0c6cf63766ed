"""Datasette's errors, answered without 5xx for anything a client can cause.

Datasette 0.65's own ``handle_exception`` hook has two faults a client can
trigger at will. It calls ``rich.get_console().print_exception()`` whenever
`rich <https://rich.readthedocs.io>`_ is importable, and that raises when no
exception is being handled (every 404 it renders outside an ``except``
block, such as ``/a/b/c/d/e/f/g`` or ``//x``), so the 404 becomes a 500 with
a traceback in the log. And a ``DatasetteError`` keeps its default status
500 for bad requests (``?_sort=nope`` raises "Cannot sort table by nope").

:func:`handle_exception` (a *wrapper* in pluggy's terms, so it sees the
answers of the other implementations) replaces Datasette's own default
answer, closing its coroutine unawaited, and leaves other plugins' answers
alone except on qsite's own paths (as a plugin in someone else's Datasette, it
answers only on /api/v1 and its own database's pages, and leaves every other
error to Datasette and its plugins): Datasette's 4xx exceptions
and every ``DatasetteError`` are answered as the 4xx they are, in Datasette's
own shape (JSON for ``.json`` paths, its error page otherwise); anything else
is logged with its traceback and answered as a plain 500 that names nothing
internal. Every one with ``Cache-Control: no-store``, as the API's errors.
"""

from __future__ import annotations

import inspect
import json
import logging
import sqlite3

from datasette import Response, hookimpl
from datasette.database import QueryInterrupted
from datasette.utils.asgi import Base400
from markupsafe import Markup

from qsite.service.api.parameters import echo
from qsite.service.compat import datasette_error_type
from qsite.service.http.disconnects import ClientGone
from qsite.service.datasette.answer_budget import AnswerTooLarge, problem
from qsite.service.http.problems import ALLOWED_METHODS, PROBLEM_CONTENT_TYPE
from qsite.service.http.settings import is_own_server, is_qsite_database, path_database
from qsite.service.http.settings import is_qsite_path as is_api_path
from qsite.service.http.tally import count

#: The title of the error Datasette's views raise for a query stopped at ``sql_time_limit_ms`` (0.65 and 1.0).
SQL_INTERRUPTED = "SQL Interrupted"

log = logging.getLogger("qsite.errors")

#: The module of Datasette's own ``handle_exception`` implementation.
DATASETTE_DEFAULT = "datasette.handle_exception"
#: Datasette's pages qsite answers itself (service/datasette/public.py).
PUBLIC_PAGES = frozenset({"/-/metadata", "/-/config", "/-/databases", "/-/threads"})

#: Methods a read-only page takes.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: What a client is told about a fault of the service itself.
INTERNAL_ERROR = "Internal error: the request could not be answered"


def error_status(exception: BaseException) -> int:
    """The status to answer ``exception`` with: its own 4xx, 400 for a DatasetteError marked 5xx, else 500."""
    if isinstance(exception, Base400):
        return exception.status
    if getattr(exception, "sqlite_errorcode", None) == sqlite3.SQLITE_TOOBIG:  # set by SQLite only, not the module
        return 400  # the request's SQL made a value past the cap (service/datasette/connections.py)
    if isinstance(exception, (QueryInterrupted, AnswerTooLarge)):
        return 400  # the request's SQL ran past the time limit: Datasette's JSON says so as a 400, its CSV raised
    if isinstance(exception, datasette_error_type()):
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
    elif isinstance(exception, datasette_error_type()):
        info = dict(exception.error_dict or {})
        message = Markup(exception.message) if exception.message_is_html else exception.message
        title = exception.title
    return {**info, "ok": False, "error": message, "status": status, "title": title}


async def error_response(datasette, request, exception: BaseException) -> Response:
    if isinstance(exception, AnswerTooLarge) and is_data(request):
        # JSON and CSV: a problem document (with Datasette's ok and error); pages: the error page below
        body = json.dumps(problem(exception), ensure_ascii=False)
        return Response(body, status=400, headers={"cache-control": "no-store"}, content_type=PROBLEM_CONTENT_TYPE)
    status = error_status(exception)
    # as every error of the API (docs/api.md, "Errors"): the next request may succeed, so no cache
    # keeps it; also on /api/v1 paths, which the plugin's wrapper leaves to the API (with_api_headers)
    headers = {"cache-control": "no-store"}
    if status >= 500 and request.method not in READ_METHODS:
        # Datasette 0.65 fails on a POST to a read-only canned query page (its
        # view answers a tuple): a method that page does not take, not a fault.
        # So one line, no traceback; the method cut as any client text quoted back (a client chooses its length).
        method = echo(request.method)
        log.info("%s %s failed in Datasette; answered 405", method, request.path)
        status, exception = 405, Base400(f"{method} is not allowed here")
        headers["allow"] = ALLOWED_METHODS
    if isinstance(exception, AnswerTooLarge):  # a page: the error page, saying the same
        exception = Base400(str(exception))
    if isinstance(exception, QueryInterrupted) or getattr(exception, "title", None) == SQL_INTERRUPTED:
        count("sql_interrupted", "sql")  # for /metrics
        count("refused", "time")
    if isinstance(exception, QueryInterrupted):  # its text is the SQL and its parameters: say what happened
        exception = Base400("SQL Interrupted: the query ran past the time limit (sql_time_limit_ms)")
    if status >= 500 and unread_parameters(request, exception):
        status, exception = 400, Base400(f"a parameter of this page could not be read: {exception}")
    if status >= 500:
        log.error(
            "error answering %s %s",
            request.method,
            request.path,
            exc_info=(type(exception), exception, exception.__traceback__),
        )
    info = error_info(exception, status)
    if request.path.endswith(".json"):
        return Response.json(info, status=status, headers=headers)
    try:
        page = await datasette.render_template([f"{status}.html", "error.html"], info, request=request)
    except Exception:  # the error page itself failed: say as little, plainly
        log.exception("error page for %s %s", request.method, request.path)
        return Response.text(str(info["error"]), status=status, headers=headers)
    return Response.html(page, status=status, headers=headers)


def is_data(request) -> bool:
    """Whether a Datasette request asks for JSON or CSV (``.json``, ``.csv``, ``?_format=``) rather than a page."""
    return request.path.endswith((".json", ".csv")) or request.args.get("_format") in ("json", "csv")


def is_datasette_default(answer) -> bool:
    """Whether a ``handle_exception`` answer is Datasette's own default one (datasette/handle_exception.py).

    It answers with a function defined in that module (``inner``, awaited by
    Datasette), told by its ``__module__``; a coroutine by its frame's module.
    Standard Python introspection, nothing of Datasette's.
    """
    frame = getattr(answer, "cr_frame", None)
    module = frame.f_globals.get("__name__") if frame is not None else getattr(answer, "__module__", None)
    return module == DATASETTE_DEFAULT


#: What Datasette 0.65's table pages raise, unanswered, on a parameter they cannot read:
#: ``_timelimit=x`` (ValueError), ``id__in=[1,2``, ``_through=x``, ``_facet_size={x`` (JSON's
#: ValueError), ``_through=1`` (TypeError), ``_where=%00`` or ``_where=1;drop table news``
#: (sqlite3.ProgrammingError: a NUL, two statements).
UNREAD_PARAMETER = (
    ValueError,
    TypeError,
    KeyError,  # _through={"table": "x"}: a JSON object without the keys Datasette reads
    OverflowError,  # position__gte=99999999999999999999999: past SQLite's 64-bit integers
    sqlite3.ProgrammingError,
    sqlite3.IntegrityError,  # "datatype mismatch": a LIMIT of text (1.0's CSV of api_news?limit=abc); nothing writes
)


def unread_parameters(request, exception: BaseException) -> bool:
    """Whether ``exception`` is a Datasette page failing on its query string: the client's 400, not a fault.

    Only on Datasette's own pages, with a query string: on qsite's paths every parameter is
    checked before anything runs (:mod:`qsite.service.api.parameters`), and a fault there stays a 500.
    """
    return isinstance(exception, UNREAD_PARAMETER) and bool(request.query_string) and not is_qsite_path(request.path)


def is_qsite_path(path: str) -> bool:
    return is_api_path(path) or path.split(".")[0] in PUBLIC_PAGES


@hookimpl(wrapper=True)
def handle_exception(datasette, request, exception):
    """The answer to an exception Datasette's router did not answer itself.

    On qsite's own paths (/api/v1 and the introspection pages it replaces)
    qsite answers. Elsewhere another plugin's answer stands untouched; only
    when none but Datasette's own default answered does qsite's replace it,
    for the two 0.65 faults in the module docstring.
    """
    others = list((yield) or ())
    if isinstance(exception, ClientGone):
        raise exception  # a stream whose client left: nothing to answer or log (service/datasette/plugin.py ends it)
    if not is_own_server(datasette) and not is_api_path(request.path) and not is_qsite_database(
        datasette, path_database(request.path)
    ):
        return others  # someone else's Datasette: its pages' errors answered as it answers them
    theirs = [answer for answer in others if not is_datasette_default(answer)]
    if theirs and not is_qsite_path(request.path):
        result = theirs
    else:
        result = [error_response(datasette, request, exception)]
    for answer in others:
        if answer not in result and inspect.iscoroutine(answer):
            answer.close()  # never awaited: Datasette's would print with rich and fail
    return result
