"""Measuring instruments: metrics, dataset loaders and baselines for the scripts.

Pure functions and small classes, used by ``scripts/eval_*.py`` and tested directly;
nothing here runs at import or touches the network.
"""
