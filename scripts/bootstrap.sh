#!/usr/bin/env bash
# Set up everything the book needs, idempotently and fast when all is present:
#   a Python >= 3.12 venv in .venv/ with requirements.txt and trglab (editable),
#   the Jupyter kernel "python3" of that venv, Debian chromium + fonts-noto-cjk
#   (+ rustc/cargo when no cargo is found), node_modules of mermaid_server/ and
#   site_assets/ (offline MathJax 3).
# Fails with one clear line when something cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "bootstrap: $*" >&2; exit 1; }
say() { echo "bootstrap: $*" >&2; }

# --- a Python >= 3.12 ---------------------------------------------------------------------
py_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }

find_python() {
    local c
    if [[ -n "${TRGLAB_PYTHON:-}" ]]; then
        py_ok "$TRGLAB_PYTHON" && { echo "$TRGLAB_PYTHON"; return 0; }
        die "TRGLAB_PYTHON=$TRGLAB_PYTHON is not a Python >= 3.12"
    fi
    # 3.12 first: the version the recorded figures were reproduced with
    for c in python3.12 python3.13 python3.14 python3; do
        if command -v "$c" >/dev/null 2>&1 && py_ok "$(command -v "$c")"; then command -v "$c"; return 0; fi
    done
    local roots=()
    if command -v pyenv >/dev/null 2>&1; then roots+=("$(pyenv root 2>/dev/null)"); fi
    roots+=("${PYENV_ROOT:-$HOME/.pyenv}" /opt/pyenv /usr/local/pyenv)
    local r
    for r in "${roots[@]}"; do
        [[ -d "$r/versions" ]] || continue
        for c in $(ls -d "$r"/versions/3.12* 2>/dev/null | sort -rV) $(ls -d "$r"/versions/3.1[3-9]* 2>/dev/null | sort -V); do
            if [[ -x "$c/bin/python3" ]] && py_ok "$c/bin/python3"; then echo "$c/bin/python3"; return 0; fi
        done
    done
    for c in /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9] /opt/python*/bin/python3; do
        if [[ -x "$c" ]] && py_ok "$c"; then echo "$c"; return 0; fi
    done
    return 1
}

if [[ -x .venv/bin/python ]]; then
    py_ok .venv/bin/python || die ".venv/ holds $(.venv/bin/python -V 2>&1), JAX 0.12.0.1 needs Python >= 3.12: remove .venv/ and run again"
else
    PY=$(find_python) || die "no Python >= 3.12 found (tried python3.1x, python3, pyenv versions); install one (e.g. pyenv install 3.12) or set TRGLAB_PYTHON=/path/to/python3.12"
    say "creating .venv/ with $PY ($("$PY" -V 2>&1))"
    "$PY" -m venv .venv || die "could not create .venv/ with $PY (on Debian: apt-get install python3-venv)"
fi

# --- Python packages (skipped when requirements.txt and pyproject.toml are unchanged) ------
STAMP=.venv/.trglab-requirements.sha256
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [[ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]] || ! .venv/bin/python -c 'import trglab' >/dev/null 2>&1; then
    say "installing requirements.txt and trglab (editable) into .venv/"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt \
        || die "pip could not install requirements.txt (see pip's message above)"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e . \
        || die "pip could not install trglab in editable mode"
    echo "$want" > "$STAMP"
fi
if [[ ! -f .venv/share/jupyter/kernels/python3/kernel.json ]]; then
    .venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null \
        || die "could not register the Jupyter kernel python3 of .venv/"
fi

# --- Debian packages ---------------------------------------------------------------------------
missing=()
command -v chromium >/dev/null 2>&1 || [[ -x /usr/bin/chromium ]] || missing+=(chromium)
fonts=$(fc-list : family 2>/dev/null || true)
[[ "$fonts" == *"Noto Sans CJK"* ]] || missing+=(fonts-noto-cjk)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ! command -v cargo >/dev/null 2>&1 && [[ ! -x "$HOME/.cargo/bin/cargo" ]]; then missing+=(rustc cargo); fi
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing Debian packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >/dev/null \
            || die "apt-get could not install: ${missing[*]}"
    else
        die "missing Debian packages: ${missing[*]} (install them: sudo apt-get install ${missing[*]})"
    fi
fi

# --- npm: the flowchart service and offline MathJax -------------------------------------------
npm_install() {  # folder
    local dir=$1
    [[ -f "$dir/package.json" ]] || die "$dir/package.json is missing"
    if [[ ! -d "$dir/node_modules" ]] || [[ "$dir/package-lock.json" -nt "$dir/node_modules" ]]; then
        say "npm ci in $dir/"
        local how=ci
        [[ -f "$dir/package-lock.json" ]] || how=install
        (cd "$dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm "$how" --no-audit --no-fund --loglevel=error >/dev/null) \
            || die "npm $how failed in $dir/ (run it there to see why)"
        touch "$dir/node_modules"
    fi
}
if [[ -f mermaid_server/package.json ]]; then
    npm_install mermaid_server
else
    die "mermaid_server/package.json is missing: the flowchart service cannot be installed"
fi
npm_install site_assets
[[ -f site_assets/node_modules/mathjax/es5/tex-chtml.js ]] || die "site_assets/node_modules/mathjax/es5/tex-chtml.js missing after npm ci"
exit 0
