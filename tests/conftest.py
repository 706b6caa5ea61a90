"""Suite-wide pytest set-up: fixtures shared by several test packages."""

# The `sync_env` fixture (a bare cache repo over file:// and an isolated CCE_HOME).
pytest_plugins = ["tests.helpers.sync_env"]
