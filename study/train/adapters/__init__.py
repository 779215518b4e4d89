"""Each framework's part of the train study, one module per framework (tensorflow.py, jax.py,
torch.py), named by its registry entry (`Framework.train`). What a module provides, and the
defaults of what it leaves out, are in study.train.frameworks, through which the rest of the
study reads them."""
