# gangplan serve / gangplan webhook (deploy/deployment.yaml runs image gangplan:0.1.0):
#   docker build -t gangplan:0.1.0 .
# Slim, non-root; the project installed from its own pyproject.toml with the dependency
# versions it was tested with pinned by constraints.txt.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY models models
COPY topology topology
COPY solver solver
COPY adapters adapters
COPY instances instances
RUN pip install -c constraints.txt . && rm -rf /src

# a fixed numeric uid, so runAsNonRoot can check it
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin gangplan
USER 65532:65532
WORKDIR /
ENTRYPOINT ["gangplan"]
CMD ["serve", "--help"]
