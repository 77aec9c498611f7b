"""The scheduler: an entry point (beside the CLI) that runs sources on their cadence."""
