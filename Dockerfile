# LEGO web app and worker image.  One image, two roles:
#   web:    docker run -p 8000:8000 -e DATABASE_URL=... -e REDIS_URL=... -e DJANGO_SECRET_KEY=... lego
#   worker: docker run --gpus all -e ... lego celery -A webapp.config worker --concurrency 1
# The worker jails uploaded models with bubblewrap, which needs user
# namespaces: Docker's default seccomp profile refuses them, so run the
# worker with --security-opt seccomp=unconfined (or a profile that allows
# unshare/clone of namespaces); otherwise its log says the sandbox could not
# be made and models run unjailed (docs/SECURITY.md; LEGO_SANDBOX=require
# makes that an error instead).
#   agents: docker run -e ... lego celery -A webapp.config worker -Q lego-agents --pool threads --concurrency 8
#   beat:   docker run -e ... lego celery -A webapp.config beat   (one per deployment: the reaper of stuck runs)
# Mount a shared volume at /var/lego (uploads and run outputs) in both; serve
# /app/static (collected at build time) from the reverse proxy at /static/.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=webapp.config.settings.production \
    LEGO_VAR_DIR=/var/lego \
    DJANGO_STATIC_ROOT=/app/static

RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev bubblewrap \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY manage.py ./
COPY lego_core ./lego_core
COPY webapp ./webapp
COPY frontend ./frontend

RUN DJANGO_SECRET_KEY=build DATABASE_URL=sqlite:////tmp/build.sqlite3 \
    python manage.py collectstatic --noinput -v 0

VOLUME ["/var/lego"]
EXPOSE 8000
# daphne with the request-body limit enforced while the body streams in (webapp/server/)
CMD ["sh", "-c", "python manage.py migrate --noinput && python -m webapp.server -b 0.0.0.0 -p 8000 webapp.config.asgi:application"]
