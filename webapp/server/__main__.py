"""``python -m webapp.server [daphne's options] webapp.config.asgi:application``:
the ``daphne`` command line with the request-body limit enforced while the
body streams in (``webapp.server.bounded``).  The Docker image serves with it."""
from daphne.cli import CommandLineInterface

from webapp.server.bounded import BoundedServer


class BoundedCommandLine(CommandLineInterface):
    """Daphne's command line, serving through ``BoundedServer``."""

    server_class = BoundedServer


if __name__ == "__main__":
    BoundedCommandLine.entrypoint()
