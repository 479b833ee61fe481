"""Importers of model graphs from other tools' files (PipeDream profiles, ...)."""
from solver_plan.graph.importers.pipedream import data_dir, load_pipedream_profile

__all__ = ["data_dir", "load_pipedream_profile"]
