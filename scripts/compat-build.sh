#!/usr/bin/env bash
# Build llama.cpp's llama-server, llama-bench and llama-quantize from the
# source that the npm package node-llama-cpp ships (llama/gitRelease.bundle);
# llama.cpp is not packaged in Debian 12. The build is cached outside the
# clone, keyed by the package version, so a second run only checks the
# binaries are there (and builds one a newer caliper asks for).
#
#   scripts/compat-build.sh            build (or reuse) and print the bin dir
#
# Environment: CALIPER_COMPAT_CACHE (default ~/.cache/caliper),
#              NODE_LLAMA_CPP_VERSION (default 3.22.1), JOBS (default 2).
# Exit status: 0 built or cached; 3 npm registry unreachable; 1 other failure.
set -euo pipefail

VER=${NODE_LLAMA_CPP_VERSION:-3.22.1}
CACHE=${CALIPER_COMPAT_CACHE:-$HOME/.cache/caliper}
JOBS=${JOBS:-2}
ROOT="$CACHE/llama.cpp-$VER"
BIN="$ROOT/build/bin"

log() { printf 'compat-build: %s\n' "$*" >&2; }

if [[ -x "$BIN/llama-server" && -x "$BIN/llama-bench" && -x "$BIN/llama-quantize" &&
      -f "$ROOT/.complete" ]]; then
    log "using cached build $BIN"
    echo "$BIN"
    exit 0
fi

command -v npm >/dev/null || {
    log "missing tool: npm (it comes with Node.js: install nodejs, or Debian's npm where no other Node.js is installed)"
    exit 1
}
for tool in cmake g++ git; do
    command -v "$tool" >/dev/null || { log "missing tool: $tool (make deps installs it)"; exit 1; }
done

mkdir -p "$ROOT"
cd "$ROOT"

if [[ ! -f src/CMakeLists.txt ]]; then
    if [[ ! -f pkg/package/llama/gitRelease.bundle ]]; then
        log "fetching node-llama-cpp@$VER from the npm registry"
        rm -rf pkg && mkdir -p pkg
        if ! (cd pkg && npm pack --silent "node-llama-cpp@$VER" >pack.out 2>pack.err); then
            log "npm cannot reach the registry or the package (node-llama-cpp@$VER):"
            sed 's/^/  npm: /' pkg/pack.err >&2 || true
            log "make compat needs the npm registry the first time (the build is then cached in $ROOT)"
            exit 3
        fi
        tar -xzf pkg/node-llama-cpp-"$VER".tgz -C pkg
        [[ -f pkg/package/llama/gitRelease.bundle ]] || { log "package has no llama/gitRelease.bundle"; exit 1; }
    fi
    log "cloning llama.cpp from the bundle"
    rm -rf src
    git clone --quiet pkg/package/llama/gitRelease.bundle src
fi

log "configuring (Release, no OpenSSL, no prebuilt web UI)"
cmake -S src -B build -DCMAKE_BUILD_TYPE=Release \
      -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF >build.log 2>&1 \
    || { tail -30 build.log >&2; log "cmake configure failed (log: $ROOT/build.log)"; exit 1; }
log "building llama-server llama-bench llama-quantize with -j$JOBS (log: $ROOT/build.log)"
cmake --build build --config Release -j"$JOBS" --target llama-server llama-bench llama-quantize \
    >>build.log 2>&1 \
    || { tail -30 build.log >&2; log "build failed (log: $ROOT/build.log)"; exit 1; }
touch .complete
log "built $BIN"
echo "$BIN"
