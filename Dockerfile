# The operator's image for users with Docker. image/build makes the same image without Docker
# (Debian bookworm + Debian's python3, the wheel in /usr/lib/planops, uid 65532).
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip wheel --no-deps -w /wheel . \
 && pip install --no-compile --target /app/usr/lib/planops /wheel/*.whl \
 && rm -rf /app/usr/lib/planops/bin

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && echo "planops:x:65532:65532:planops:/nonexistent:/usr/sbin/nologin" >> /etc/passwd \
 && echo "planops:x:65532:" >> /etc/group
COPY --from=build /app/ /
# planops' modules byte-compiled (the wheel is installed --no-compile, and PYTHONDONTWRITEBYTECODE
# keeps them from being written later): a step pod's collector compiles nothing at its start
RUN python3 -m compileall -q --invalidation-mode unchecked-hash /usr/lib/planops/planops
ENV PYTHONPATH=/usr/lib/planops PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["python3", "-m", "planops.main"]
