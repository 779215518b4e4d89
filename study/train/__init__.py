"""The train study: time to a validation target for any Keras model on your data, per optimizer
and per framework (Keras 3 on TensorFlow, JAX and PyTorch), on the same instances everywhere."""
