#!/usr/bin/env bash
# Run by Snakemake inside a freshly created envs/lostmid.yaml environment: installs the lostmid
# package of this checkout (editable, without dependencies: the environment has them).
# Snakemake runs it from the working directory, which is the checkout when snakemake is started
# from the repository root (the documented way); set LOSTMID_SOURCE=/path/to/checkout otherwise.
set -euo pipefail
source_dir=${LOSTMID_SOURCE:-$PWD}
if ! grep -qs '^name = "lostmid"' "$source_dir/pyproject.toml"; then
    echo "envs/lostmid.post-deploy.sh: $source_dir is not the lostmid checkout; run snakemake from the repository root or set LOSTMID_SOURCE" >&2
    exit 1
fi
python -m pip install --no-deps --no-build-isolation --quiet -e "$source_dir"
