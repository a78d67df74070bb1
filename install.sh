#!/usr/bin/env bash
# Install clawd into ./.venv with pinned dependencies and make sure a default model is present.
#
#   ./install.sh          # the product
#   ./install.sh --dev    # plus the test tools (and Ray, which the tests train through)
#
# Idempotent: a second run with nothing changed skips pip and finishes in seconds.
# On a machine where `nvidia-smi` works, llama.cpp is built with CUDA, bitsandbytes is added
# and, when the model hub is reachable, Qwen3-1.7B becomes the default model.
set -euo pipefail

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }

DEV=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown option $arg" >&2; usage >&2; exit 2 ;;
  esac
done

cd "$(dirname "${BASH_SOURCE[0]}")"
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "install.sh: clawd needs Python 3.11 or newer ($PYTHON is $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi

CUDA=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then CUDA=1; fi

if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi
VPY=.venv/bin/python

# Everything pip is asked for is a function of these inputs; unchanged inputs skip pip.
STAMP_FILE=.venv/.clawd-install
STAMP="$(cat pyproject.toml constraints.txt install.sh | sha256sum | cut -c1-16)-dev$DEV-cuda$CUDA"
if [ "$(cat "$STAMP_FILE" 2>/dev/null)" = "$STAMP" ] && .venv/bin/clawd --version >/dev/null 2>&1; then
  say "dependencies up to date"
else
  PIP=("$VPY" -m pip install --disable-pip-version-check -c constraints.txt)
  "$VPY" -m pip install --disable-pip-version-check -q --upgrade "pip>=24" >/dev/null
  if [ "$CUDA" = 1 ]; then
    say "CUDA found: building llama-cpp-python with GGML_CUDA (about 10 minutes the first time)"
    CMAKE_ARGS="-DGGML_CUDA=on" "${PIP[@]}" --no-cache-dir llama-cpp-python
    EXTRAS="cuda"
  elif grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
    # A native build uses ggml's AMX kernels on CPUs that report AMX; in VMs that do not grant
    # AMX tile state they crash on the first multi-token batch (seen on 2026-11-30). Build for
    # the CPU's vector units instead, without AMX.
    say "installing llama-cpp-python without AMX kernels (a source build: about 8 minutes)"
    FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
    if grep -qw avx512f /proc/cpuinfo; then
      FLAGS="$FLAGS -DGGML_AVX512=ON"
      grep -qw avx512_vnni /proc/cpuinfo && FLAGS="$FLAGS -DGGML_AVX512_VNNI=ON"
      grep -qw avx512vbmi /proc/cpuinfo && FLAGS="$FLAGS -DGGML_AVX512_VBMI=ON"
      grep -qw avx512_bf16 /proc/cpuinfo && FLAGS="$FLAGS -DGGML_AVX512_BF16=ON"
    fi
    CMAKE_ARGS="$FLAGS" "${PIP[@]}" --no-cache-dir llama-cpp-python
    EXTRAS=""
  else
    say "installing llama-cpp-python (a source build: about 6 minutes the first time)"
    "${PIP[@]}" llama-cpp-python
    EXTRAS=""
  fi
  [ "$DEV" = 1 ] && EXTRAS="${EXTRAS:+$EXTRAS,}dev,ray"  # the tests train on a local Ray cluster
  say "installing clawd and its dependencies${EXTRAS:+ ($EXTRAS)}"
  "${PIP[@]}" -e ".${EXTRAS:+[$EXTRAS]}"
  echo "$STAMP" > "$STAMP_FILE"
fi

have_model() { "$VPY" -c "
import sys
from clawd.config import clawd_home
from clawd.models import installed
sys.exit(0 if any(m.name == '$1' for m in installed(clawd_home())) else 1)"; }

if [ "$CUDA" = 1 ] && ! have_model qwen3-1.7b; then
  say "pulling qwen3-1.7b for this GPU"
  if .venv/bin/clawd models pull qwen3-1.7b --use; then :; else
    say "could not pull qwen3-1.7b (is the model hub reachable?); keeping smollm2-135m as default"
  fi
fi
if ! have_model smollm2-135m; then
  say "installing the embedded default model smollm2-135m"
  .venv/bin/clawd models pull smollm2-135m
fi

# Put `clawd` on the PATH the way pipx does: a link in ~/.local/bin.
BIN="${XDG_BIN_HOME:-$HOME/.local/bin}"
mkdir -p "$BIN"
ln -sf "$PWD/.venv/bin/clawd" "$BIN/clawd"
case ":$PATH:" in
  *":$BIN:"*) ;;
  *) say "note: $BIN is not on your PATH; add it, or run $PWD/.venv/bin/clawd" ;;
esac

.venv/bin/clawd models list
cat <<EOF

clawd is installed. Next:
  clawd chat        # chat in the TUI (starts the daemon in the background if needed)
  clawd serve       # or run the daemon in the foreground; editors use http://127.0.0.1:8765/v1
  ./install.sh --dev && .venv/bin/python -m pytest    # run the tests
EOF
