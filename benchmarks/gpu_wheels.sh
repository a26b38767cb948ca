#!/usr/bin/env bash
# Fill .whl/ with the wheels that a bare GPU machine (PyTorch, numpy, pandas, matplotlib,
# seaborn, scikit-learn, hypothesis, pytest, tqdm, pyyaml already there) lacks for
# benchmarks/gpu_check.sh: papermill and the Jupyter kernel stack, Captum and Zennit.
# Python 3.12, x86-64 Linux; each pinned once (two versions of one package stop the
# install there). The folder is git-ignored here (.git/info/exclude) and travels with
# `carry: [".whl"]`; see the header of benchmarks/gpu_check.sh for the call.
#
#     bash benchmarks/gpu_wheels.sh [DIR]          (default: .whl)
set -eu
DIR=${1:-.whl}
mkdir -p "$DIR"
PINS=(
    captum==0.9.0 zennit==0.5.1 papermill==2.7.0 nbclient==0.11.0 nbformat==5.11.1
    ipykernel==7.4.0 ipython==9.18.1 ipython_pygments_lexers==1.1.1 jupyter_client==8.10.0
    jupyter_core==5.9.1 comm==0.2.3 debugpy==1.8.22 matplotlib_inline==0.2.2
    nest_asyncio2==1.7.4 pyzmq==27.3.0 tornado==6.6.1 traitlets==5.16.1 platformdirs==4.14.8
    entrypoints==0.4.2 tenacity==9.2.1 fastjsonschema==2.22.3 jsonschema==4.26.0
    jsonschema_specifications==2025.9.1 referencing==0.37.0 rpds_py==2026.9.1
    asttokens==3.0.2 executing==2.3.0 pure_eval==0.2.4 stack_data==0.6.3 jedi==0.20.1
    parso==0.8.7 pexpect==4.9.0 ptyprocess==0.7.0 prompt_toolkit==3.0.53 wcwidth==0.9.4
)
PLATFORMS=()
for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_17 manylinux2014 manylinux1 manylinux_2_5; do
    PLATFORMS+=(--platform "${p}_x86_64")
done
${PYTHON:-python3} -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${PLATFORMS[@]}" -d "$DIR" "${PINS[@]}"
ls "$DIR"/*.whl | wc -l | xargs echo "wheels in $DIR:"
