#!/usr/bin/env bash
# Install the peer latency tools for benchmarks/fidelity.py and benchmarks/capacity.py, each in its own
# venv OUTSIDE the repo, plus the local word-level tokenizer they all use (no model hub needed).
# Recipes and caveats: shared/reference/peers.md.  Usage:
#     PEERS_DIR=/work/peers benchmarks/peers_setup.sh        # ~4 min in parallel, ~8 GB (guidellm pulls torch)
# Recorded versions: aiperf 0.13.0, guidellm 0.8.1, inference-perf 0.7.0 (Python 3.12.1).
set -euo pipefail
PEERS_DIR=${PEERS_DIR:-/work/peers}
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY312:-$(command -v python3.12 || ls -d ~/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1)}
[ -x "$PY" ] || { echo "needs Python >= 3.12 (set PY312=/path/to/python3.12)"; exit 1; }
mkdir -p "$PEERS_DIR"
for tool in aiperf guidellm inference-perf; do
  ( [ -x "$PEERS_DIR/$tool/bin/$tool" ] || { "$PY" -m venv "$PEERS_DIR/$tool" &&
      "$PEERS_DIR/$tool/bin/pip" install -q "$tool" > "$PEERS_DIR/$tool.log" 2>&1; } ) &
done
wait
# the tokenizer: WordLevel over the reference target's WORDS, whitespace split (the emitter and the
# reference target count one token per word); tokenizers comes with inference-perf's transformers
mkdir -p "$PEERS_DIR/tok"
PYTHONPATH="$REPO" "$PEERS_DIR/inference-perf/bin/python" - "$PEERS_DIR/tok" <<'PYEOF'
import json, sys
from pytest_llm_latency.targets.reference.tokenizer import WORDS
from tokenizers import Tokenizer, models, pre_tokenizers
vocab = {"[UNK]": 0}
for w in WORDS:
    vocab.setdefault(w, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.save(sys.argv[1] + "/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, open(sys.argv[1] + "/tokenizer_config.json", "w"))
PYEOF
for tool in aiperf guidellm inference-perf; do
  "$PEERS_DIR/$tool/bin/pip" list 2>/dev/null | grep -i "^$tool " || echo "$tool: install failed, see $PEERS_DIR/$tool.log"
done
