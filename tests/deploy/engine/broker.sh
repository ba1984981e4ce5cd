#!/bin/bash
# The Tansu stand-in's entrypoint: the broker keeps its log where apache/kafka keeps its own, in the
# compose file's kafka-data volume, so that it survives a restart or `down` and `up` as Kafka's does.
# Tansu's durable storage is S3: SeaweedFS serves it on the container's loopback, its files in the
# volume. Arguments: Tansu's.
set -euo pipefail
data=${BROKER_DATA_DIR:-/var/lib/kafka/data}
mkdir -p "$data"
weed server -dir="$data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.port=9333 -volume.port=8080 \
  -filer.port=8888 -s3 -s3.port=8333 >"$data/weed.log" 2>&1 &
# The bucket: created once (anonymous access, loopback only); "already exists" on a restart.
for _ in $(seq 120); do
  if { exec 3<>/dev/tcp/127.0.0.1/8333; } 2>/dev/null; then
    printf 'PUT /tansu HTTP/1.1\r\nHost: 127.0.0.1:8333\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' >&3
    status=$(head -n 1 <&3 | cut -d' ' -f2)
    exec 3>&-
    case $status in 200|409) break ;; esac
  fi
  sleep 0.5
done
export AWS_ACCESS_KEY_ID=stand-in AWS_SECRET_ACCESS_KEY=stand-in AWS_DEFAULT_REGION=us-east-1 \
  AWS_ENDPOINT=http://127.0.0.1:8333 AWS_ALLOW_HTTP=true
exec tansu "$@"
