#!/bin/sh
# gpuprov sandbox stand-in for conda @VERSION@ (Miniforge): a shell script, no conda code. It implements
# `conda --version` and `conda create --yes --prefix P [--override-channels] [--channel=C]... python=X.Y`,
# which makes a venv of the host's /usr/bin/pythonX.Y in place of conda's Python.
set -eu
case "${1:-}" in
    --version|-V) echo "conda @VERSION@"; exit 0 ;;
    create) shift ;;
    *) echo "conda (gpuprov sandbox stand-in) implements only --version and create" >&2; exit 2 ;;
esac
prefix=""
python=""
yes=0
while [ $# -gt 0 ]; do
    case "$1" in
        -y|--yes) yes=1 ;;
        -p|--prefix) shift; prefix=$1 ;;
        --prefix=*) prefix=${1#--prefix=} ;;
        -c|--channel) shift ;;
        --channel=*|--override-channels|-q|--quiet) ;;
        python=*) python=${1#python=} ;;
        *) echo "PackagesNotFoundError: $1 (this conda stand-in installs only python=X.Y)" >&2; exit 1 ;;
    esac
    shift
done
if [ -z "$prefix" ] || [ "$yes" != 1 ]; then
    echo "conda create (gpuprov sandbox stand-in): needs --yes and --prefix PATH" >&2
    exit 2
fi
if [ -e "$prefix" ]; then
    echo "CondaValueError: prefix already exists: $prefix" >&2
    exit 1
fi
interpreter=/usr/bin/python${python:-3}
if [ ! -x "$interpreter" ]; then
    echo "PackagesNotFoundError: python=$python (this stand-in uses the host's $interpreter, missing)" >&2
    exit 1
fi
"$interpreter" -m venv "$prefix"
mkdir -p "$prefix/conda-meta"
echo "python=$python via $interpreter (gpuprov sandbox stand-in for conda @VERSION@)" \
    > "$prefix/conda-meta/history"
echo "done"
