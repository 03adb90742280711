# The kvstore CLI specification's use cases 1-8, as it writes them, run
# by TestUseCases with kvstore on PATH (its default table, the tenant in
# KVSTORE_TENANT). Changes, each marked "eskv:": the endless loops of use
# cases 3 and 4 run a bounded number of times, deploy.sh, process-task.py,
# cleanup-old-logs.sh, process-message.sh and curl are stand-ins, and
# "check:" lines assert what the specification says happens.
deploy.sh() { echo "deploying..."; }
process-task.py() { echo "processing $(echo "$1" | jq -c .data)"; }
cleanup-old-logs.sh() { echo "cleaning up"; }
process-message.sh() { echo "processing $1"; }
curl() { echo curl "$@"; }
sleep() { :; }
check() { if ! eval "$1"; then echo "check failed: $1" >&2; exit 1; fi; }

echo "## Use case 1: Distributed Rate Limiting"
# Initialize rate limit counter
kvstore set rate-limit/api-key-123 1000 --ttl 3600  # 1000 requests/hour
# On each API call (atomic decrement)
kvstore dec rate-limit/api-key-123 || echo "Rate limit exceeded"
# Check remaining quota
kvstore get rate-limit/api-key-123
check '[ "$(kvstore get rate-limit/api-key-123 | jq -c "{key, value}")" = "{\"key\":\"rate-limit/api-key-123\",\"value\":999}" ]'

echo "## Use case 2: Distributed Deployment Lock"
# Agent 1: Acquire lock before deploying
if kvstore lock acquire deploy-prod --ttl 600 --owner agent-1; then
  echo "Lock acquired, deploying..."
  # Agent 2: Tries to deploy (blocked)  (eskv: while agent 1 holds it)
  kvstore lock acquire deploy-prod --ttl 600 --owner agent-2 || code=$?
  check '[ "$code" = 4 ]'  # Exit code: 4 (lock unavailable)
  deploy.sh
  kvstore lock release deploy-prod --owner agent-1
else
  echo "Deployment already in progress"
  exit 1
fi

echo "## Use case 3: Task Distribution via Queue"
# Producer: Add tasks to queue
for task in task1 task2 task3; do
  kvstore queue push work-queue "{\"task\": \"$task\", \"params\": {...}}"
done
# Consumer agents (parallel workers)
for round in 1 2 3 4; do  # eskv: while true
  # Pop task with 5-minute visibility timeout
  task=$(kvstore queue pop work-queue --visibility-timeout 300) && code=0 || code=$?

  if [ $code -eq 0 ]; then
    # Process task
    process-task.py "$task"

    # Acknowledge completion (delete from queue)
    receipt=$(echo "$task" | jq -r '.receipt')
    kvstore queue ack work-queue "$receipt"
  else
    echo "Queue empty, waiting..."
    check '[ "$code" = 4 ]'
    sleep 10
  fi
done

echo "## Use case 4: Leader Election for Singleton Tasks"
# Agent attempts to become leader
if kvstore leader elect cleanup-manager --ttl 30 --id agent-123; then
  echo "I am the leader!"

  for beat in 1 2; do  # eskv: while true
    # Perform singleton task
    cleanup-old-logs.sh

    # Extend leadership with heartbeat
    kvstore leader heartbeat cleanup-manager --ttl 30 --id agent-123

    sleep 20
  done
else
  echo "Another agent is leader, standing by..."
  exit 1
fi
kvstore leader check cleanup-manager
kvstore leader elect cleanup-manager --ttl 30 --id agent-456 || echo "Another agent is leader, standing by..."

echo "## Use case 5: Atomic Counter for Request IDs"
for i in 1 2; do  # eskv: twice
  # Generate unique ID (atomic increment)
  request_id=$(kvstore inc request-counter --create --format value)
  echo "Processing request ID: $request_id"

  # Use in distributed system
  curl -H "X-Request-ID: $request_id" https://api.example.com/process
done

echo "## Use case 6: Deduplication with Sets"
for round in 1 2; do  # eskv: the same message twice
  (
  # Check if message already processed
  message_id="msg-abc-123"

  if kvstore sismember processed-messages "$message_id"; then
    echo "Message already processed, skipping"
    exit 0
  fi

  # Process message
  process-message.sh "$message_id"

  # Mark as processed
  kvstore sadd processed-messages "$message_id"
  )
done

echo "## Use case 7: Recent Activity Log (List)"
# Add event to front of log (newest first)
kvstore lpush activity-log "User login at $(date)"
# Retrieve last 100 events
kvstore lrange activity-log 0 99
# Trim old events (keep only last 1000)
kvstore ltrim activity-log 0 999

echo "## Use case 8: Multi-Step Transaction"
cd "$(mktemp -d)"
# Create transaction file
cat > tx.json <<EOT
[
  {"op": "inc", "key": "total-requests", "by": 1},
  {"op": "inc", "key": "successful-requests", "by": 1},
  {"op": "set", "key": "last-request-time", "value": "$(date -u +%s)"}
]
EOT

# Execute atomically
kvstore transaction --file tx.json
check '[ "$(kvstore get total-requests | jq .value)" = 1 ]'
echo "## done"
