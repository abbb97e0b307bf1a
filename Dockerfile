# syntax=docker/dockerfile:1
# sluice's apps in a Debian 12 slim image, as a non-root user (docs/operations.md "Scale-out").
# Not built on the project's machines (no container daemon there); the deploy.dockerfile test
# checks what can be checked without one: that the runtime stage installs a package for every
# shared library the apps link, and that the image runs as a non-root user.
#
#   docker build -t sluice .
#   docker run --rm -p 8080:8080 -p 9901:9901 sluice --upstream host.docker.internal:9000

# --- build: the release preset, the apps only (no tests, no micro benchmarks) ---------------
FROM debian:12-slim AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake pkg-config \
       node-llhttp liburing-dev libssl-dev libfmt-dev libtomlplusplus-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt CMakePresets.json ./
COPY cmake cmake
COPY core core
COPY backends backends
COPY apps apps
COPY benchmarks/load benchmarks/load
RUN cmake --preset release -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCHMARKS=OFF -DSLUICE_BUILD_EXAMPLES=OFF \
    && cmake --build --preset release -j"$(nproc)" \
       --target sluice-gateway sluice-slow-backend sluice-hello sluice-load

# --- runtime: the binaries and the shared libraries they link --------------------------------
FROM debian:12-slim
# runtime-packages: the shared libraries of the apps besides libc6, libstdc++6 and libgcc-s1
# (in the base image); the deploy.dockerfile test compares this line with ldd of the build.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libfmt9 libssl3 liburing2 \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 sluice \
    && useradd --system --uid 10001 --gid sluice --no-create-home --shell /usr/sbin/nologin sluice
COPY --from=build /src/build/release/bin/sluice-gateway /src/build/release/bin/sluice-slow-backend \
     /src/build/release/bin/sluice-hello /src/build/release/bin/sluice-load /usr/local/bin/
USER 10001:10001
# 8080: the public listener; 9901: the admin listener (/metrics, /healthz, /readyz).
EXPOSE 8080 9901
ENTRYPOINT ["/usr/local/bin/sluice-gateway"]
CMD ["--listen", "0.0.0.0:8080", "--set", "admin.listen=0.0.0.0:9901", "--upstream", "127.0.0.1:9000"]
