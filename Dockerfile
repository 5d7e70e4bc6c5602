# stream-dp worker image.
#   docker build -t stream-dp .
#   docker run --rm -p 8000:8000 -e STREAM_DP_KAFKA_BOOTSTRAP=kafka:9092 stream-dp serve
#
# Two stages: the first builds a virtual environment with `pip install .`, the second
# copies only that environment into a clean python:3.11-slim and runs as a non-root user.
# Every dependency ships a manylinux wheel for CPython 3.11, so no compiler is needed.

FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN python -m venv /opt/stream-dp
# .dockerignore lets only the files the package build needs into the context.
COPY . /src
RUN /opt/stream-dp/bin/pip install /src


FROM python:3.11-slim

LABEL org.opencontainers.image.title="stream-dp" \
      org.opencontainers.image.description="User-level differentially private hexagon-hour statistics from Kafka" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PATH=/opt/stream-dp/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    STREAM_DP_WEB_HOST=0.0.0.0 \
    STREAM_DP_WEB_PORT=8000

# A fixed numeric uid/gid so Kubernetes can check runAsNonRoot and set fsGroup.
RUN groupadd --system --gid 10001 stream-dp \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
       --home-dir /var/lib/stream-dp --shell /usr/sbin/nologin stream-dp \
    && mkdir -p /var/lib/stream-dp \
    && chown 10001:10001 /var/lib/stream-dp

COPY --from=build /opt/stream-dp /opt/stream-dp

USER 10001:10001
# The worker's local files (Faust's data directory, relative to the working directory)
# go here; mount a volume to keep them across container restarts.
WORKDIR /var/lib/stream-dp
VOLUME ["/var/lib/stream-dp"]
EXPOSE 8000

# Liveness of `serve`; one-shot commands (produce, demo) disable it in docker-compose.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('STREAM_DP_WEB_PORT', '8000'), timeout=4)"]

ENTRYPOINT ["stream-dp"]
CMD ["serve"]
