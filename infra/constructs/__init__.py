"""One construct per concern, composed by infra/stack.py."""
