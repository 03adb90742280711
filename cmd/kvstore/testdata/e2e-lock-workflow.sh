# The kvstore CLI specification's end-to-end test, two agents competing
# for a lock, as it writes it, run by TestE2ELockWorkflow with kvstore on
# PATH. eskv: the table is created with kvstore create-table instead of
# aws dynamodb create-table, and there is no table to delete after.
set -e

# Setup
export KVSTORE_TABLE=e2e-test-kvstore
kvstore create-table --table "$KVSTORE_TABLE" >/dev/null  # eskv: for aws dynamodb create-table

# Test: Two agents competing for lock
(
  kvstore lock acquire deploy --ttl 5 --owner agent-1
  echo "Agent 1 acquired lock"
  sleep 2
  kvstore lock release deploy --owner agent-1
  echo "Agent 1 released lock"
) &

sleep 1

(
  if kvstore lock acquire deploy --ttl 5 --owner agent-2 --wait 10; then
    echo "Agent 2 acquired lock after waiting"
    kvstore lock release deploy --owner agent-2
  else
    echo "Agent 2 timed out"
    exit 1
  fi
) &

wait
