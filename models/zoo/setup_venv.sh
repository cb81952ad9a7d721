#!/bin/sh
# Creates the virtual environment models/zoo/make_zoo.py runs in: Debian's Python with its torch
# 1.13, torchvision and onnx (--system-site-packages), plus Hugging Face transformers from PyPI
# (4.49 is the newest release that still supports torch 1.13). Only the zoo script uses it; the
# C++ tests read the committed files and never run Python.
#   models/zoo/setup_venv.sh [DIR]      (default DIR: /tmp/otter-zoo-venv)
set -eu
DIR=${1:-/tmp/otter-zoo-venv}
/usr/bin/python3 -m venv --system-site-packages "$DIR"
"$DIR/bin/pip" install --quiet "transformers==4.49.0" "tokenizers==0.21.0" "huggingface-hub==0.29.1" "safetensors==0.5.2"
"$DIR/bin/python" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
