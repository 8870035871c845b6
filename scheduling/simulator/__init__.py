"""Trace-driven simulator for the scheduling engine (plain Python; tqdm and plotly allowed).

`fill/` reproduces the FGD paper's experiment, `run/` replays a mixed cluster through the engine;
see cli.py for the command line.
"""
