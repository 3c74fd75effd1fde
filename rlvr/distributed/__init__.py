"""Scale-out: the process group and its collectives, DDP and FSDP2, the asynchronous rollout producer, Ray placement."""
