"""README's statement table stays in sync with the registry."""

from pathlib import Path

from attnbounds.theory import registry


def test_readme_lists_every_statement_id():
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    missing = [i for i in registry.ids() if f"`{i}`" not in text]
    assert not missing, f"README.md lacks these statement ids: {missing}"
