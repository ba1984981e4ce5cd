# A stand-in for python:3.11.14-slim-bookworm where no registry is reachable: Debian's Python 3.11 in
# a virtual environment first on PATH (pip installs there, as in the official image), over a base made
# by debootstrap and `docker import` (tests/support/docker_engine.py). Build context: a folder of the
# host's extra CA certificates, which pip needs behind a TLS-inspecting proxy.
FROM local/debian:bookworm
COPY ca-certificates/ /usr/local/share/ca-certificates/
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-pip ca-certificates \
    && update-ca-certificates \
    && python3 -m venv /usr/local/python \
    && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/local/python/bin:$PATH PIP_CERT=/etc/ssl/certs/ca-certificates.crt
