"""What is trained: the data, the shipped examples, a Keras model and the loss table, a native
model recognised, the workload interface every model is stepped through, the checks every model
kind passes before any clock, and the initial weights every framework starts from."""
