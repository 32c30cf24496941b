"""Recipes for b2b_multicurrency (bench/archetypes/b2b_multicurrency.md): see bench/playbooks/common.py."""

from __future__ import annotations

from bench.playbooks.common import Recipe

RECIPES: dict[str, Recipe] = {}
