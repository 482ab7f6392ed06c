"""Shared infrastructure with no domain: errors and exit codes, input files, schemas, printing, the mutex, child processes."""
