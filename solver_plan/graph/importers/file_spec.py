"""How a MODEL names a file: `[hf:]path[:key=value,...]` (docs/graph-file.md); read by the file
dispatcher (`graph_file.load_model_file`) and the Hugging Face importer alike."""
from __future__ import annotations

from pathlib import Path

from solver_plan.keyvalues import parse_key_values

GRAPH_SUFFIXES = (".json", ".yaml", ".yml")
MODEL_SUFFIXES = GRAPH_SUFFIXES + (".onnx",)
HF_PREFIX = "hf:"


def split_file_spec(spec: str) -> tuple[str, dict[str, str]] | None:
    """'dir/model.onnx:batch=8,seq=128' -> ('dir/model.onnx', {...}); None if `spec` names no model
    file (a zoo spec or a profile)."""
    text = spec.strip()
    hf = text.startswith(HF_PREFIX)
    if hf:
        text = text[len(HF_PREFIX):]
    path, options = text, ""
    for suffix in MODEL_SUFFIXES:
        marker = text.rfind(suffix + ":")
        if marker >= 0 and "=" in text[marker:]:
            path, options = text[:marker + len(suffix)], text[marker + len(suffix) + 1:]
            break
    else:
        head, colon, tail = text.rpartition(":")
        if hf and colon and "=" in tail and "/" not in tail:  # hf:model-folder:seq=8
            path, options = head, tail
    if Path(path).suffix.lower() not in MODEL_SUFFIXES and not spec.strip().startswith(HF_PREFIX):
        return None
    return path, parse_key_values(options, path, "FILE:key=value,key=value")
