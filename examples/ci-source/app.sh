#!/bin/sh
# The application examples/ci-pipeline.yaml builds and tests: it greets whoever it is given,
# with the version its build wrote beside it.
here=$(dirname "$0")
echo "hello, ${1:-world} (version $(cat "$here/VERSION"))"
