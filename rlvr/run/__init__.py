"""A run around the step: set-up and checks, run directories, checkpoints, logging, plots, export, threads, interruption, and the orchestration of ``rlvr train``."""
