"""Recipes for saas_contracts (bench/archetypes/saas_contracts.md): see bench/playbooks/common.py."""

from __future__ import annotations

from bench.playbooks.common import Recipe

RECIPES: dict[str, Recipe] = {}
