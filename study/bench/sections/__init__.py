"""The bench's sections, one module each (study.bench says what one provides): each row's
status is 'ok', 'unavailable', 'error' or 'skipped'."""
