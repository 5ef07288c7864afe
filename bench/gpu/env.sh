#!/usr/bin/env bash
# Puts the CUDA libraries nmpsim loads at run time (libcuda, libnvrtc.so.13,
# libcublas.so.13) on LD_LIBRARY_PATH, then runs the given command.
#
#   bench/gpu/env.sh target/release/nmpsim kernels check --backend all
#   bench/gpu/env.sh cargo test --release -p nmpsim-kernels --test cuda
#
# It looks in the usual CUDA install folders and in the NVIDIA wheels of any
# Python on PATH (PyTorch brings them), and prints what it found.
set -euo pipefail

dirs=()
add() { [ -d "$1" ] && dirs+=("$1"); return 0; }
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
         /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu; do
    add "$d"
done
for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    while IFS= read -r d; do add "$d"; done < <("$py" - <<'PY' 2>/dev/null || true
import glob, os, site, sys
roots = set(site.getsitepackages() + [site.getusersitepackages()] + sys.path)
for r in sorted(p for p in roots if p and os.path.isdir(p)):
    for lib in glob.glob(os.path.join(r, "nvidia", "*", "lib")):
        print(lib)
PY
)
done
# The NVRTC that `./x test` installs, if any.
here=$(cd "$(dirname "$0")/../.." && pwd)
add "$here/.tools/nvrtc/nvidia/cu13/lib"

path=""
for d in "${dirs[@]}"; do path="${path:+$path:}$d"; done
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

for lib in libcuda.so libnvrtc.so.13 libcublas.so.13; do
    hit=""
    for d in "${dirs[@]}"; do
        if compgen -G "$d/$lib*" >/dev/null; then hit="$d"; break; fi
    done
    echo "gpu-env: $lib: ${hit:-NOT FOUND}" >&2
done
[ $# -gt 0 ] && exec "$@"
