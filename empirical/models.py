"""``--model``: a model trained here (``tiny``, ``standin``), a local folder, or a hub name.

The one entry point of model loading; imports run one way (``models`` -> ``training`` -> ``modelload``).
A folder written by ``training`` (copied elsewhere, say) keeps its own tokenizer and training record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnbounds.empirical import training
from attnbounds.empirical.modelload import LoadedModel, load_pretrained
from attnbounds.theory.mathematics.errors import InvalidArgument

#: what ``--model`` takes besides folders and hub names
TRAINED = tuple(training.SPECS)


def load_model(name: str, *, text: Any = None, progress: bool = True) -> LoadedModel:
    """The model called ``name``: one trained here (needs ``text``), a local folder, or a hub name."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"--model must be one of {', '.join(TRAINED)}, a folder or a hub name such as 'gpt2', "
                              f"got {name!r}")
    if name in training.SPECS:
        if text is None:
            raise InvalidArgument(f"--model {name} trains on the text; give a text (--text or ATTNBOUNDS_TEXT)")
        return training.load_or_train(text, name, progress=progress)
    loaded = load_pretrained(name)
    folder = Path(loaded.path) if loaded.path else None
    if folder is not None and (folder / training.TRAINING_FILE).is_file():
        loaded.tokenizer = training.model_tokenizer(folder)
        loaded.info.update(training.training_info(folder))
    return loaded
