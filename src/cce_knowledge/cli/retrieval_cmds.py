"""Placeholder: commands of this group are registered here (see cli/main.py)."""
