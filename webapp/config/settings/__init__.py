"""Settings split cookiecutter-style: ``base`` holds what every setting
shares and reads the environment; ``local`` (``make run``), ``test`` (pytest)
and ``production`` adjust it."""
