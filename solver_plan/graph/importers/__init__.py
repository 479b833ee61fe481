"""Importers of model graphs from other tools' files."""
from solver_plan.graph.importers.pipedream import load_pipedream_profile

__all__ = ["load_pipedream_profile"]
