"""What kubectl-plan's cluster verbs exit with: a contract scripts depend on (docs/cli.md).

0 success, 1 the plan failed, 2 bad input or an invalid plan, 3 the cluster could not be
reached or refused the request.
"""

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_CLUSTER = 0, 1, 2, 3
