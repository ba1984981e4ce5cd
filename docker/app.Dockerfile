# The specmetrics command line for the compose stack (create-topics, ingest, report, serve, loadgen, health).
# Build context: the repository root. Every version is pinned: the base image tag here, the packages
# in docker/app-requirements.txt (installed --no-deps, so nothing unpinned comes in).

FROM python:3.11.14-slim-bookworm AS wheel
RUN pip install --no-cache-dir setuptools==80.9.0
COPY pyproject.toml README.md /src/
COPY schemas /src/schemas
COPY transport /src/transport
COPY storage /src/storage
COPY emitter /src/emitter
COPY ingest /src/ingest
COPY queries /src/queries
COPY reports /src/reports
COPY monitoring /src/monitoring
COPY specmetrics /src/specmetrics
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels /src

FROM python:3.11.14-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY docker/app-requirements.txt /tmp/app-requirements.txt
COPY --from=wheel /wheels /tmp/wheels
RUN pip install --no-cache-dir --no-deps -r /tmp/app-requirements.txt /tmp/wheels/*.whl \
    && pip check \
    && rm -rf /tmp/wheels /tmp/app-requirements.txt
# Named volumes mounted on these folders take their owner from the image: the unprivileged user.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/specmetrics specmetrics \
    && mkdir -p /var/lib/specmetrics/data /var/lib/specmetrics/reports /var/lib/specmetrics/spool /run/specmetrics \
    && chown -R specmetrics:specmetrics /var/lib/specmetrics /run/specmetrics
USER specmetrics
WORKDIR /var/lib/specmetrics
CMD ["specmetrics", "--help"]
