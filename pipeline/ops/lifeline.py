"""The children of ``qsite up`` die with it, however it dies.

``qsite up`` stops its ``qsite schedule`` and ``qsite serve`` children itself when it
gets SIGTERM or Ctrl-C; a SIGKILL gives it no chance, and the children would run on,
the server holding the port. So ``qsite up`` names itself to its children in
:data:`PARENT_ENV`, and each child asks the Linux kernel (``prctl(PR_SET_PDEATHSIG)``)
for SIGTERM when its parent ends: the child then stops as it does on any SIGTERM.

The child asks at start rather than in a ``preexec_fn``, which is unsafe in a parent
that has threads (``qsite up``'s ingest leaves some). Elsewhere than Linux nothing
changes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

#: The environment variable ``qsite up`` sets for its children: its own pid.
PARENT_ENV = "QSITE_UP_PID"
#: From ``<linux/prctl.h>``.
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """If started by ``qsite up`` (:data:`PARENT_ENV`), get SIGTERM when it ends; if it has already, now."""
    parent = os.environ.pop(PARENT_ENV, "")  # not passed on: this process's own children are its business
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        return  # refused (a sandbox): as before, `qsite up` stops its children when it can
    if os.getppid() != int(parent):  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
