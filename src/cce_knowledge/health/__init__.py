"""What is installed and whether it is sound: `status` and `doctor`."""
