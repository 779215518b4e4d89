"""Array backends: the small set of operations the algorithms are written against."""
