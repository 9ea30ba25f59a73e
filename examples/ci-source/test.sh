#!/bin/sh
# The tests of examples/ci-pipeline.yaml's application, run from the workspace once it is built:
# a unit test of its output, and an integration test against the database the step's services
# start (DATABASE_HOST, DATABASE_PORT). A real test suite would run `psql "$DATABASE_URL"`
# or its driver; the example's database is busybox's nc, which answers each connection with a
# line.
set -eu
got=$(build/app CI)
want="hello, CI (version $REVISION)"
if [ "$got" != "$want" ]; then
    echo "unit: FAIL: got '$got', want '$want'" >&2
    exit 1
fi
echo "unit: ok"
reply=$(nc "$DATABASE_HOST" "$DATABASE_PORT" </dev/null)
if [ "$reply" != "accepting connections" ]; then
    echo "integration: FAIL: the database at $DATABASE_HOST:$DATABASE_PORT said '$reply'" >&2
    exit 1
fi
echo "integration: ok ($DATABASE_HOST:$DATABASE_PORT: $reply)"
