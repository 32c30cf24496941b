"""Recipes for retail_454 (bench/archetypes/retail_454.md): see bench/playbooks/common.py."""

from __future__ import annotations

from bench.playbooks.common import Recipe

RECIPES: dict[str, Recipe] = {}
