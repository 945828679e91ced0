"""Statistics of the project's studies, torch-free (issue 52: the second study's estimators in ``study2``)."""
