#!/bin/sh
# Installs kandev from this unpacked release archive.
# Usage: ./install.sh [--prefix DIR]   (default: ~/.local; the binary goes to DIR/bin)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
prefix="${HOME}/.local"
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a folder" >&2; exit 2; }
              prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    -h|--help) sed -n '2,3p' "$0" | sed 's/^# //'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done

# An empty prefix would install into /bin; `~` is not expanded after `--prefix=`; a relative
# one would depend on where this runs.
case "$prefix" in
  "") echo "install.sh: --prefix needs a folder (e.g. --prefix ~/.local)" >&2; exit 2 ;;
  "~") prefix=$HOME ;;
  "~/"*) prefix="$HOME/${prefix#"~/"}" ;;
esac
case "$prefix" in
  /*) ;;
  *) prefix="$(pwd)/$prefix" ;;
esac
if [ -e "$prefix" ] && [ ! -d "$prefix" ]; then
  echo "install.sh: $prefix is a file, not a folder; pass another --prefix" >&2
  exit 2
fi

# Every file as packaged, or nothing is installed.
command -v sha256sum >/dev/null 2>&1 || { echo "install.sh: sha256sum is missing (coreutils)" >&2; exit 1; }
if ! (cd "$here" && sha256sum --quiet --strict -c MANIFEST.sha256); then
  echo "install.sh: this archive's files do not match MANIFEST.sha256; download it again" >&2
  exit 1
fi

mkdir -p "$prefix/bin" "$prefix/share/doc/kandev" 2>/dev/null || {
  echo "install.sh: cannot make folders under $prefix; pick a --prefix you can write" >&2
  exit 1
}
# Copied beside, then renamed over: a running kandev keeps its file.
cp "$here/bin/kandev" "$prefix/bin/.kandev.new"
chmod 0755 "$prefix/bin/.kandev.new"
mv -f "$prefix/bin/.kandev.new" "$prefix/bin/kandev"
cp "$here/LICENSE" "$here/README.md" "$prefix/share/doc/kandev/"

version=$("$prefix/bin/kandev" --version)
echo "Installed $version as $prefix/bin/kandev."
case ":${PATH}:" in
  *":$prefix/bin:"*) ;;
  *) echo "Add it to your PATH:  export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
echo "Next: kandev serve   (then open http://127.0.0.1:38429), or: kandev service install"
