"""The run configuration: one typed section per module, validated once at load, frozen after."""
