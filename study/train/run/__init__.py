"""One run, in its own process: the timed loop, the Keras and native paths that feed it (trainers,
the optimizers by name, the one flat objective of L-BFGS), the device, the warm-up of a sweep's
process, and `measure`, which the sweep engine calls."""
