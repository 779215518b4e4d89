"""One run, in its own process: the timed loop, the native path that feeds it, the optimizers by
name, L-BFGS's flat objective, and `measure`, which the sweep engine calls."""
