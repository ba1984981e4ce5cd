# A stand-in for prom/prometheus where no registry is reachable: Debian's Prometheus (2.42), started as
# the official image starts (its entrypoint, default flags, user and data folder), so the compose
# file's service and the files it mounts run unchanged.
FROM local/debian:bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
