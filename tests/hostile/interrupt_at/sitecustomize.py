"""A test seam, never on a user's path: with this folder first on ``PYTHONPATH``, Python imports
this module as it starts (``site``'s ``sitecustomize``), and the process sends itself the signal
``EP_TESTBED_TEST_SIGNAL`` (default SIGINT) the moment it first imports the module named by
``EP_TESTBED_TEST_INTERRUPT_AT``: a Ctrl-C that lands at a known point of the start, with no clock."""

import os
import signal
import sys

_AT = os.environ.get("EP_TESTBED_TEST_INTERRUPT_AT")


class _InterruptAt:
    """A meta-path finder that finds nothing and signals once when ``_AT`` is imported."""

    fired = False

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == _AT and not cls.fired:
            cls.fired = True
            os.kill(os.getpid(), getattr(signal, os.environ.get("EP_TESTBED_TEST_SIGNAL", "SIGINT")))
        return None


if _AT:
    sys.meta_path.insert(0, _InterruptAt)
