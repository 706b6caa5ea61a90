"""The GitHub Action: its interface, its driver, and the runner's workflow-command glue."""
