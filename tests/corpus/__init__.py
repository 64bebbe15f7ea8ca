"""The bad-input corpus (see make_corpus.py)."""
