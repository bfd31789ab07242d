# gpufleet: one image for the agent and the collector (`gpufleet agent`, `gpufleet collector`).
# Build: docker build -t gpufleet:0.1.0 .   (the Helm chart's image.repository/tag point here)

# --- build: wheels for the project and its dependencies ---------------------------------
FROM python:3.11-slim AS build
WORKDIR /src
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY pyproject.toml README.md ./
COPY agent/ agent/
COPY collector/ collector/
COPY gpufleet/ gpufleet/
RUN pip wheel --wheel-dir /wheels .

# --- run: the wheels only, no compiler, no sources --------------------------------------
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels gpufleet \
    && groupadd --system --gid 10001 gpufleet \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/gpufleet --create-home gpufleet \
    && gpufleet --help >/dev/null
# the collector runs as this user; the agent's pod runs as root only to reach the
# kubelet's pod-resources socket (the chart's agent.runAsUser)
USER 10001:10001
WORKDIR /var/lib/gpufleet
EXPOSE 8080 9835
ENTRYPOINT ["gpufleet"]
CMD ["--help"]
