"""The names a test session owns: its run and agents queues and its kernel
cache, made once per pytest process and inherited by the servers and workers
it starts.

Under pytest-xdist every worker process is a session of its own: the
controller (which loads the settings too) would otherwise hand one set of
names to all of them, and one worker's Celery workers would take the other's
runs.  ``LEGO_TEST_SESSION`` records whose names the environment holds, so a
process started by an xdist worker (a Celery worker, daphne) keeps them.
No Django here: ``tests/conftest.py`` calls it before settings load.
"""
import os
import tempfile
import uuid


def own_test_session_names() -> None:
    """Set ``LEGO_CELERY_QUEUE``, ``LEGO_AGENT_QUEUE`` and ``LEGO_CACHE_DIR``
    for this test session unless they are its own already (or, outside
    pytest-xdist, unless the caller set them)."""
    session = os.environ.get("PYTEST_XDIST_WORKER", "")
    if os.environ.get("LEGO_TEST_SESSION") == session and "LEGO_CACHE_DIR" in os.environ:
        return
    tag = uuid.uuid4().hex[:12]
    names = {
        "LEGO_CELERY_QUEUE": f"lego-test-{tag}",
        "LEGO_AGENT_QUEUE": f"lego-agents-test-{tag}",
        "LEGO_CACHE_DIR": tempfile.mkdtemp(prefix="lego-test-cache-"),
    }
    for name, value in names.items():
        if session:
            os.environ[name] = value  # not the controller's
        else:
            os.environ.setdefault(name, value)
    os.environ["LEGO_TEST_SESSION"] = session
