"""Models trained beside the policy (a critic, PRISM's discriminator, PROPA's process reward model)."""
