"""What is trained: the data, the examples, the models and their losses, the workload interface,
the checks before any clock, and the initial weights every framework starts from."""
