"""A study kept outside the package, as a user would keep one: registered by naming its plugin
module in CONVERGENCE_STUDY_STUDIES (this folder's parent on PYTHONPATH), it gets its answers,
its report section and `compare` from this folder alone (tests/test_toy_study.py)."""
