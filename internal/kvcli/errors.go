package kvcli

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Exit codes. They are part of kvctl's interface: scripts branch on them.
const (
	exitOK     = 0
	exitFailed = 1 // a condition failed: not found, version conflict, field mismatch, wrong type
	exitUsage  = 2 // invalid arguments, rejected by kvctl or the server
	exitServer = 3 // server, authentication or network error
	// exitUnavailable is the seed's coordination error: lock_held,
	// not_lock_holder, not_leader, queue_empty, and a lock run that lost
	// its lock.
	exitUnavailable = 4
	exitInterrupted = 130
)

// codeQueueEmpty is the API's answer to a pop of an empty queue (issue
// 13's queue_empty): exit 4, the seed's "Queue empty (non-blocking pop)".
const codeQueueEmpty = "queue_empty"

// usageError is an argument kvctl rejects before calling the API.
type usageError struct {
	msg      string
	solution string
	cmd      string
}

func (e *usageError) Error() string { return e.msg }

// exitError ends kvctl with code and no message (exists answering "no",
// lock run passing on its command's status).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// failure ends kvctl with code after printing msg and solution.
type failure struct {
	code          int
	msg, solution string
}

func (e *failure) Error() string { return e.msg }

// fail prints err on stderr in the seed's format, "Error: …", a blank
// line, "Solution: …", and "Details:" when there are any (the namespace a
// short key was resolved in), and returns the exit code of its class.
func (a *app) fail(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	code, msg, solution := a.explain(err)
	if a.flavor.Seed { // solutions name commands as kvctl spells them
		solution = strings.ReplaceAll(solution, "'kvctl ", "'"+a.flavor.Name+" ")
	}
	fmt.Fprintf(a.stderr, "Error: %s\n\nSolution: %s\n", printable(msg), printable(solution))
	if a.ns.project != "" {
		fmt.Fprintf(a.stderr, "\nDetails:\n  - table: %s (from %s); keys not starting with tenant/ are paths in it\n", printable(a.ns.project), a.ns.source)
	}
	return code
}

// explain classifies err: its exit code, what happened and what to do.
func (a *app) explain(err error) (code int, msg, solution string) {
	var (
		ue  *usageError
		ne  *client.NetworkError
		e   *contract.Error
		f   *failure
		ll  *lockLost
		esc *client.EscalationError
	)
	switch {
	case errors.As(err, &f):
		return f.code, f.msg, f.solution
	case errors.As(err, &ll):
		return a.explainLost(ll)
	case errors.As(err, &ue):
		solution = ue.solution
		if solution == "" {
			solution = fmt.Sprintf("see '%s --help'", ue.cmd)
		}
		return exitUsage, ue.msg, solution
	case errors.As(err, &esc):
		return a.escalated(err, esc)
	case errors.As(err, &ne):
		return a.explainNetwork(ne)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return a.explainNetwork(&client.NetworkError{Err: err})
	case errors.As(err, &e):
		return a.explainAPI(err, e)
	case !a.running:
		// cobra's own complaints: unknown command, wrong argument count.
		return exitUsage, err.Error(), fmt.Sprintf("see '%s --help'", a.cmdPath)
	default:
		return exitServer, err.Error(), "the server's answer could not be read: check that --url (" + a.url + ") points at eskv's API"
	}
}

func (a *app) explainNetwork(ne *client.NetworkError) (int, string, string) {
	switch {
	case errors.Is(ne, context.Canceled):
		return exitInterrupted, "interrupted", "run the command again; an interrupted write may or may not have been applied (repeat it with the same --request-id to be safe)"
	case errors.Is(ne, context.DeadlineExceeded):
		return exitServer, fmt.Sprintf("no answer from %s within --timeout %v", a.url, a.timeout),
			"check that the stack is healthy (curl " + strings.TrimRight(a.url, "/") + "/readyz), or raise --timeout"
	}
	if msg, solution, ok := a.explainTLS(ne); ok {
		return exitServer, msg, solution
	}
	return exitServer, fmt.Sprintf("cannot reach eskv at %s: %v", a.url, ne.Err),
		"is the stack running? Start it with 'make run' in the eskv repository, or point --url (KVCTL_URL) at the writer's HTTP address"
}

// explainTLS explains a network error that is the TLS handshake's: the
// writer's certificate is not trusted, or not for --url's host, or the
// URL's scheme is not what the writer serves.
func (a *app) explainTLS(ne *client.NetworkError) (msg, solution string, ok bool) {
	var (
		ua x509.UnknownAuthorityError
		hn x509.HostnameError
		ci x509.CertificateInvalidError
	)
	switch {
	case errors.As(ne, &ua):
		return fmt.Sprintf("cannot reach eskv at %s: %v", a.url, ne.Err),
			"the writer's certificate is signed by a CA this machine does not trust: give that CA's PEM file with --cacert FILE (or KVCTL_CACERT)", true
	case errors.As(ne, &hn):
		return fmt.Sprintf("cannot reach eskv at %s: %v", a.url, ne.Err),
			"--url's host is not one the writer's certificate names: use a host name or address it names (see the error), or have the certificate reissued with it", true
	case errors.As(ne, &ci):
		return fmt.Sprintf("cannot reach eskv at %s: %v", a.url, ne.Err),
			"the writer's certificate is expired or not valid for a server: have it renewed (the writer reloads the files when they change)", true
	case strings.Contains(ne.Err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf("cannot reach eskv at %s: %v", a.url, ne.Err),
			"the writer serves plain HTTP: use http:// in --url (KVCTL_URL)", true
	}
	return "", "", false
}

// explainAPI explains an error answer; the message ends with the stable
// code (and a conflict's correlation id) in brackets.
func (a *app) explainAPI(err error, e *contract.Error) (int, string, string) {
	code, solution := a.solve(err, e)
	tag := e.Code
	if e.CorrelationID != "" {
		tag += ", correlation id " + e.CorrelationID
	}
	return code, fmt.Sprintf("%s [%s]", e.Message, tag), solution
}

// solve returns the exit code of an error answer and what to do about it.
func (a *app) solve(err error, e *contract.Error) (int, string) {
	subject := a.subject
	if subject == "" {
		subject = "the key"
	}
	switch e.Code {
	case contract.ENotFound:
		if e.Field == "" { // no such route: the URL has a path it should not
			return exitServer, "check that --url (" + a.url + ") is the API's base URL, e.g. " + defaultURL
		}
		return exitFailed, a.notFound(trouble{a: a, e: e, subject: subject})
	case contract.EConflict:
		return exitFailed, a.conflict(subject, e)
	case contract.EInvalid:
		return exitUsage, invalidSolution(e.Field, a.cmdPath)
	case contract.ETooLarge:
		return exitUsage, fmt.Sprintf("store a smaller value: the server's limit is ESKV_MAX_VALUE_BYTES (%d KiB compacted by default)", contract.DefaultMaxValueBytes>>10)
	case contract.EUnauthenticated:
		if a.tokenSource == "" {
			return exitServer, "no token was given: set KVCTL_TOKEN or --token; 'make run' saves the local stack's token in " + devTokenFile + ", which kvctl reads when run from the repository root"
		}
		return exitServer, "the token from " + a.tokenSource + " is not one the server knows: check KVCTL_TOKEN or --token (the local stack's token is in " + devTokenFile + ")"
	case contract.EForbidden:
		return exitServer, a.forbidden(subject, e)
	case contract.ECursorExpired:
		return exitFailed, "the log no longer holds the changes after --from: list " + subject + " again (kvctl list --all) and watch from now, without --from"
	case contract.EUnavailable:
		return exitServer, "the key's partition is moving between writers or catching up, and kvctl's retries ran out: retry in a few seconds; repeat a write with the same --request-id so one that did commit is not applied twice"
	case contract.EOutcomeUnknown:
		if e.RequestID != "" {
			return exitServer, fmt.Sprintf("the write may or may not have been applied, and kvctl's retries ran out: repeat the same command with --request-id %s in a few seconds; it is applied once at most", e.RequestID)
		}
		return exitServer, "the write may or may not have been applied: read " + subject + " before writing it again (give writes a --request-id to make them safe to repeat)"
	case contract.EForwardLoop:
		return exitServer, "the writer reached forwards this key's requests back to itself: a writer's ESKV_ADVERTISE_URL is wrong (its /readyz says which partitions); tell the operator, or retry through another writer"
	case contract.ELockHeld, contract.ENotLockHolder, contract.ENotLeader:
		return exitUnavailable, a.unavailable(trouble{a: a, e: e, subject: subject})
	case codeQueueEmpty:
		return exitUnavailable, "the queue has no visible item now: try again later (a script's loop sleeps and pops again), or push one"
	case contract.EStaleReceipt:
		return exitFailed, fmt.Sprintf("nothing was acknowledged: the receipt is not the current delivery of an item in flight (use the receipt your pop printed, whole); an item not acknowledged before its deadline goes back to %s and is delivered again with a new receipt; pop again, and give work that takes longer a longer --visibility-timeout", subject)
	case contract.EWrongType:
		return exitFailed, wrongType(trouble{a: a, e: e, subject: subject})
	case contract.EFieldMismatch:
		cur := "missing"
		if e.Current != nil {
			cur = fmt.Sprintf("%s (version %d)", fieldOf(e.Current.Value, a.field), e.Current.Version)
		}
		return exitFailed, fmt.Sprintf("field %s of %s is %s now, not %s: re-read it with 'kvctl field get %s %s' and decide again",
			a.field, subject, cur, shorten(a.expected), subject, a.field)
	case contract.EOutOfRange:
		if bound := e.Field[strings.LastIndex(e.Field, ".")+1:]; bound == "min" || bound == "max" { // a transaction's ops[i].min
			return exitFailed, fmt.Sprintf("nothing was changed: the result would leave the increment's %s; wait until %s changes, or change the bound", bound, subject)
		}
		return exitFailed, fmt.Sprintf("the counter would leave the 64-bit integer range: use a smaller --by, or reset it with 'kvctl set %s 0'", subject)
	}
	if errors.Is(err, client.ErrUnexpectedAnswer) {
		return exitServer, "check that --url (" + a.url + ") points at eskv's API and not at another service"
	}
	return exitServer, "the server failed; its log has the detail. Retry, and report it if it persists"
}

// conflict says what to do about a version_conflict: a request id used
// for another write, a key that is gone, or one at another version.
func (a *app) conflict(subject string, e *contract.Error) string {
	if e.Field == "requestId" {
		return "this --request-id was already used for a different write of " + subject + ": use a new id (repeating an id only replays its identical write)"
	}
	if e.Current == nil {
		return subject + " does not exist now: create it with --expected-version 0, or leave out --expected-version"
	}
	if a.createOnly {
		return fmt.Sprintf("%s already exists at version %d (value %s): keep it, or overwrite it with --expected-version %d",
			subject, e.Current.Version, shorten(string(e.Current.Value)), e.Current.Version)
	}
	return fmt.Sprintf("%s is at version %d now (value %s): re-read it with 'kvctl get %s' and retry with --expected-version %d",
		subject, e.Current.Version, shorten(string(e.Current.Value)), subject, e.Current.Version)
}

// forbidden says which grant the token lacks: the read right for a
// condition on the value, or the right the command needs.
func (a *app) forbidden(subject string, e *contract.Error) string {
	if what := valueCondition(e.Field); what != "" {
		return fmt.Sprintf("the token may write %s but not read it, and %s tests its value, which only a token that may read it may do: leave it out, or use a token whose grant covering %s includes \"read\" as well as \"write\" (an entry of the server's tokens file such as {\"prefix\":\"%s\",\"rights\":[\"read\",\"write\"]})",
			subject, what, subject, tenantOf(subject))
	}
	right := a.right
	if right == "" {
		right = "read"
	}
	return fmt.Sprintf("use a token with a grant whose prefix covers %s and whose rights include %q: an entry of the server's tokens file (ESKV_TOKENS_FILE) such as {\"prefix\":\"%s\",\"rights\":[\"read\",\"write\"]}; the local dev token (%s) may read and write every tenant/",
		subject, right, tenantOf(subject), devTokenFile)
}

// invalidSolution says how to fix the field the server rejected, in
// kvctl's terms.
func invalidSolution(field, cmd string) string {
	switch field {
	case "key":
		return fmt.Sprintf("keys look like tenant/<tenant>/project/<project>/<path>: lowercase a-z 0-9 - _ . components joined by /, at most %d characters", contract.MaxKeyLen)
	case "prefix":
		return "a list prefix starts with tenant/<tenant>/project/<project>/, e.g. tenant/acme/project/demo/"
	case "value":
		return "the value must be JSON (quote text: '\"hello\"')"
	case "expectedVersion":
		return "--expected-version is 0 (the key must not exist) or a positive version"
	case "ttlSeconds", "semantics.ttlSeconds":
		if s := ttlSolution(cmd); s != "" {
			return s
		}
		return "--ttl is " + ttlRange() + "; leave it out for no expiry"
	case "holder":
		return fmt.Sprintf("the holder (--holder, --id or KVCTL_HOLDER) is 1 to %d characters of UTF-8", contract.MaxHolderLen)
	case "by":
		return "--by is a non-zero integer"
	case "min", "max":
		return "--min and --max are integers, --max at least --min"
	case "set", "unset", "if.field", "field":
		return fmt.Sprintf("field names are 1 to %d bytes of UTF-8, and a patch changes at most %d fields, each once", contract.MaxFieldNameBytes, contract.MaxPatchFields)
	case "if.equals":
		return "EXPECTED is a JSON value, or text (taken as a JSON string)"
	case "semantics.purpose":
		return "--purpose is one of " + strings.Join(contract.Purposes, ", ")
	case "semantics.producer":
		return fmt.Sprintf("--producer is at most %d characters", contract.MaxProducerLen)
	case "semantics.consumerHints":
		return fmt.Sprintf("give at most %d --hint values, each 1 to %d characters", contract.MaxConsumerHints, contract.MaxConsumerHintLen)
	case "requestId":
		return fmt.Sprintf("--request-id is at most %d characters", contract.MaxRequestIDLen)
	case "specRef":
		return fmt.Sprintf("--spec-ref is at most %d characters", contract.MaxSpecRefLen)
	case "limit":
		return fmt.Sprintf("--limit is between 1 and %d", contract.MaxListLimit)
	case "cursor":
		return "--cursor takes the nextCursor of an earlier page of the same prefix"
	}
	if strings.HasPrefix(field, "set.") {
		return "field values are JSON, or text (taken as a JSON string), within the value size limit"
	}
	return fmt.Sprintf("see '%s --help'", cmd)
}

// ttlRange is the range of --ttl: "between 1s and 10 years (87600h)".
func ttlRange() string {
	const year = 365 * 24 * 3600
	return fmt.Sprintf("between 1s and %d years (%dh)", contract.MaxTTLSeconds/year, contract.MaxTTLSeconds/3600)
}

// notFound says what to do about an absent key (or field): the
// command's own line (commandSolutions), or how to create or find it.
func (a *app) notFound(t trouble) string {
	if s := commandLine(t, func(s solutions) line { return s.absent }); s != "" {
		return s
	}
	return fmt.Sprintf("create it with 'kvctl set %s VALUE', or look for it with 'kvctl list %s'", t.subject, projectPrefix(t.subject))
}

// unavailable says what to do about lock_held, not_lock_holder and
// not_leader: the command's own line (commandSolutions), or what the
// holder's tenure allows.
func (a *app) unavailable(t trouble) string {
	subject, e := t.subject, t.e
	if s := commandLine(t, func(s solutions) line { return s.held }); s != "" {
		return s
	}
	holder, version := holding(e)
	if e.Field == "key" { // a plain write of a held lock or leadership
		return fmt.Sprintf("%s is held by %s: use the 'kvctl lock' or 'kvctl leader' commands, or break it on purpose by naming its version (--expected-version %d)", subject, holder, version)
	}
	me := fmt.Sprintf("%s (from %s)", a.holder, a.holderSource)
	switch {
	case e.Code == contract.ELockHeld:
		return fmt.Sprintf("%swait (longer) for %s to release it with --wait DURATION, e.g. --wait 1m, or retry after its lease ends; an operator can break it with 'kvctl delete %s --expected-version %d'",
			a.waitedNote(), holder, subject, version)
	case e.Code == contract.ENotLockHolder && e.Current == nil:
		return fmt.Sprintf("the lock is free (released, or its lease ended), so %s does not hold it: take it again with 'kvctl lock acquire %s', and treat what it protected as changed meanwhile", me, subject)
	case e.Code == contract.ENotLockHolder:
		return fmt.Sprintf("the lock is held by %s, not by %s: give the holder that acquired it (--holder, or KVCTL_HOLDER; the default is USER@HOST), see 'kvctl lock check %s'", holder, me, subject)
	case e.Current == nil:
		return fmt.Sprintf("the pool has no leader now (resigned, or its lease ended): %s must stop acting as leader, and may run 'kvctl leader elect %s' to try again", me, subject)
	}
	return fmt.Sprintf("%s leads, not %s: stop acting as leader; run 'kvctl leader elect %s' to be a candidate again", holder, me, subject)
}

// holding is the holder ("another holder" when unknown) and the version
// of the lock or leadership in an answer's current entry.
func holding(e *contract.Error) (holder string, version int64) {
	holder = "another holder"
	if e.Current != nil {
		version = e.Current.Version
		if h := holderOf(e.Current.Value); h != "" {
			holder = h
		}
	}
	return holder, version
}

// waitedNote says that --wait ran out, or is "" when it was not given.
func (a *app) waitedNote() string {
	if a.waited > 0 {
		return fmt.Sprintf("it was still taken after --wait %v; ", a.waited)
	}
	return ""
}

// wrongType says what to do when the key's value does not fit the
// command: the command's own line (commandSolutions), what the key is
// when it is a collection, or to look at its value.
func wrongType(t trouble) string {
	if s := commandLine(t, func(s solutions) line { return s.wrongType }); s != "" {
		return s
	}
	if p := collectionType(t.e); p != "" {
		return fmt.Sprintf("%s is a %s: change it with the %s commands, or remove the whole %s with 'kvctl delete %s'", t.subject, p, p, p, t.subject)
	}
	return fmt.Sprintf("%s's value does not fit this command; see 'kvctl get %s'", t.subject, t.subject)
}

// touchLockSolution says what to do about a touch of a lock or leader
// lease (lock_held, not_leader, or wrong_type when it named a version):
// only its holder renews it.
func touchLockSolution(subject string, e *contract.Error) string {
	if e.Current != nil && e.Current.Semantics.Purpose == contract.PurposeLeader {
		return fmt.Sprintf("%s is a leader lease: its leader renews it with 'kvctl leader heartbeat %s'", subject, subject)
	}
	return fmt.Sprintf("%s is a lock: its holder renews the lease with 'kvctl lock extend %s --ttl DURATION'", subject, subject)
}

// holderOf reads the holder of a lock's stored value.
func holderOf(v json.RawMessage) string {
	var l struct {
		Holder string `json:"holder"`
	}
	_ = json.Unmarshal(v, &l)
	return l.Holder
}

// fieldOf returns a field of an object value, or "missing".
func fieldOf(v json.RawMessage, field string) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(v, &fields) != nil {
		return "missing"
	}
	if f, ok := fields[field]; ok {
		return shorten(string(f))
	}
	return "missing"
}

// projectPrefix returns tenant/<t>/project/<p>/ of a key, or the key
// itself when it has no path below its project.
func projectPrefix(key string) string {
	if s := contract.ScopeOf(key); s != key && len(key) > len(s)+1 {
		return s + "/"
	}
	return key
}

// tenantOf returns tenant/<t>/ of a key, or tenant/.
func tenantOf(key string) string {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) < 3 || parts[0] != "tenant" {
		return "tenant/"
	}
	return "tenant/" + parts[1] + "/"
}

func shorten(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// valueCondition names, for a message, the part of a request a token that
// may write a key but not read it was refused (decide.CheckBlind: field
// min, max, by, if, a transaction's ops[i].condition.field, ...), or ""
// when a 403's field is the key or prefix itself (a missing grant).
func valueCondition(field string) string {
	switch p := field[strings.LastIndexByte(field, '.')+1:]; {
	case field == "" || p == "key" || p == "prefix":
		return ""
	case p == "min" || p == "max":
		return "--" + p
	case p == "by":
		return "--by beyond ±4294967296"
	case p == "if":
		return "the expected value of the field"
	case strings.HasSuffix(field, "condition.field"):
		return "a field condition (" + field + ")"
	}
	return field
}
