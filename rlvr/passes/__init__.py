"""No-grad passes over a step's batch that produce the extra tensors some components read."""
