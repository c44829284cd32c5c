#!/bin/sh
# gpuprov sandbox stand-in for the Miniforge3 @VERSION@-0 installer (Linux x86_64): a shell script, no conda
# code. It implements batch mode, `-b -p PREFIX`, and installs a stand-in `conda` (see PREFIX/STANDIN).
set -eu
batch=0
prefix="${HOME}/miniforge3"
while getopts "bhp:" option; do
    case "$option" in
        b) batch=1 ;;
        p) prefix=$OPTARG ;;
        h) echo "usage: $0 -b [-p PREFIX]  (gpuprov sandbox stand-in for Miniforge3)"; exit 0 ;;
        *) exit 2 ;;
    esac
done
if [ "$batch" != 1 ]; then
    echo "this gpuprov sandbox stand-in installs in batch mode only (-b)" >&2
    exit 2
fi
if [ -e "$prefix" ]; then
    echo "ERROR: File or directory already exists: '$prefix'" >&2
    exit 1
fi
echo "PREFIX=$prefix"
mkdir -p "$prefix/bin" "$prefix/conda-meta" "$prefix/envs"
cat > "$prefix/bin/conda" <<'CONDA_SCRIPT'
. ./conda.sh
CONDA_SCRIPT
chmod 0755 "$prefix/bin/conda"
echo "Miniforge3 @VERSION@-0 here is a gpuprov sandbox stand-in: conda is a small shell script."     > "$prefix/STANDIN"
echo "installation finished."
