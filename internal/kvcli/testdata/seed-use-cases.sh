# The kvstore seed's use cases 1, 2 and 5, as the seed writes them, run by
# TestSeedUseCases with kvctl built as kvstore on PATH and the namespace
# in KVSTORE_TABLE (tenant/acme/project/seed). Differences from the seed,
# each marked "eskv:": dec takes --min 0 (an eskv counter may go below
# zero), deploy.sh and curl are stand-ins. stdout is not a terminal, so
# every answer is JSON, the seed's default.
deploy.sh() { echo "deploying..."; }

echo "## Use case 1: distributed rate limiting"
# Initialize rate limit counter
kvstore set rate-limit/api-key-123 1000 --ttl 3600  # 1000 requests/hour
# On each API call (atomic decrement)
kvstore dec rate-limit/api-key-123 --min 0 || echo "Rate limit exceeded"  # eskv: --min 0
# Check remaining quota
kvstore get rate-limit/api-key-123 | jq -c '{key, value}'
# eskv: the quota runs out
kvstore set rate-limit/api-key-123 1 --ttl 3600 >/dev/null
kvstore dec rate-limit/api-key-123 --min 0 || echo "Rate limit exceeded"
kvstore dec rate-limit/api-key-123 --min 0 || echo "Rate limit exceeded"
kvstore get-counter rate-limit/api-key-123

echo "## Use case 2: distributed deployment lock"
# Agent 1: Acquire lock before deploying
if kvstore lock acquire deploy-prod --ttl 600 --owner agent-1; then
  echo "Lock acquired, deploying..."
  # Agent 2: Tries to deploy (blocked) while agent 1 holds it
  kvstore lock acquire deploy-prod --ttl 600 --owner agent-2 || echo "agent-2: exit code $? (lock unavailable)"
  deploy.sh
  kvstore lock release deploy-prod --owner agent-1
else
  echo "Deployment already in progress"
  exit 1
fi

echo "## Use case 5: atomic counter for request IDs"
for i in 1 2; do
  # Generate unique ID (atomic increment)
  request_id=$(kvstore inc request-counter --create --format value)
  echo "Processing request ID: $request_id"
  # Use in distributed system (eskv: echoed, not sent)
  echo curl -H "X-Request-ID: $request_id" https://api.example.com/process
done
