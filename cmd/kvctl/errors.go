package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
)

// Exit codes. They are part of kvctl's interface: scripts branch on them.
const (
	exitOK     = 0
	exitFailed = 1 // a condition failed: not found, version conflict
	exitUsage  = 2 // invalid arguments, rejected by kvctl or the server
	exitServer = 3 // server, authentication or network error
	// exitUnavailable is "lock unavailable or not leader": the API's
	// lock_held code (used by the lock and leader commands once the API
	// has them).
	exitUnavailable = 4
	exitInterrupted = 130
)

// usageError is an argument kvctl rejects before calling the API.
type usageError struct {
	msg      string
	solution string
	cmd      string
}

func (e *usageError) Error() string { return e.msg }

// exitError ends kvctl with code and no message (exists answering "no").
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// fail prints err as "Error: …" and "Solution: …" on stderr and returns
// the exit code of its class.
func (a *app) fail(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	code, msg, solution := a.explain(err)
	fmt.Fprintf(a.stderr, "Error: %s\nSolution: %s\n", msg, solution)
	return code
}

// explain classifies err: its exit code, what happened and what to do.
func (a *app) explain(err error) (code int, msg, solution string) {
	var (
		ue *usageError
		ne *client.NetworkError
		e  *events.Error
	)
	switch {
	case errors.As(err, &ue):
		solution = ue.solution
		if solution == "" {
			solution = fmt.Sprintf("see '%s --help'", ue.cmd)
		}
		return exitUsage, ue.msg, solution
	case errors.As(err, &ne):
		return a.explainNetwork(ne)
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
	return exitServer, fmt.Sprintf("cannot reach eskv at %s: %v", a.url, ne.Err),
		"is the stack running? Start it with 'make run' in the eskv repository, or point --url (KVCTL_URL) at the writer's HTTP address"
}

// explainAPI explains an error answer; the message ends with the stable
// code (and a conflict's correlation id) in brackets.
func (a *app) explainAPI(err error, e *events.Error) (int, string, string) {
	code, solution := a.solve(err, e)
	tag := e.Code
	if e.CorrelationID != "" {
		tag += ", correlation id " + e.CorrelationID
	}
	return code, fmt.Sprintf("%s [%s]", e.Message, tag), solution
}

// solve returns the exit code of an error answer and what to do about it.
func (a *app) solve(err error, e *events.Error) (int, string) {
	subject := a.subject
	if subject == "" {
		subject = "the key"
	}
	switch e.Code {
	case events.ENotFound:
		if e.Field == "" { // no such route: the URL has a path it should not
			return exitServer, "check that --url (" + a.url + ") is the API's base URL, e.g. " + defaultURL
		}
		return exitFailed, fmt.Sprintf("create it with 'kvctl set %s VALUE', or look for it with 'kvctl list %s'", subject, scopeOf(subject))
	case events.EConflict:
		if e.Field == "requestId" {
			return exitFailed, "this --request-id was already used for a different write of " + subject + ": use a new id (repeating an id only replays its identical write)"
		}
		if e.Current == nil {
			return exitFailed, subject + " does not exist now: create it with --expected-version 0, or leave out --expected-version"
		}
		if a.createOnly {
			return exitFailed, fmt.Sprintf("%s already exists at version %d (value %s): keep it, or overwrite it with --expected-version %d",
				subject, e.Current.Version, shorten(string(e.Current.Value)), e.Current.Version)
		}
		return exitFailed, fmt.Sprintf("%s is at version %d now (value %s): re-read it with 'kvctl get %s' and retry with --expected-version %d",
			subject, e.Current.Version, shorten(string(e.Current.Value)), subject, e.Current.Version)
	case events.EInvalid:
		return exitUsage, invalidSolution(e.Field, a.cmdPath)
	case events.ETooLarge:
		return exitUsage, "store a smaller value: the server's limit is ESKV_MAX_VALUE_BYTES (64 KiB compacted by default)"
	case events.EUnauthenticated:
		if a.tokenSource == "" {
			return exitServer, "no token was given: set KVCTL_TOKEN or --token; 'make run' saves the local stack's token in " + devTokenFile + ", which kvctl reads when run from the repository root"
		}
		return exitServer, "the token from " + a.tokenSource + " is not one the server knows: check KVCTL_TOKEN or --token (the local stack's token is in " + devTokenFile + ")"
	case events.EForbidden:
		right := a.right
		if right == "" {
			right = "read"
		}
		return exitServer, fmt.Sprintf("use a token with a grant whose prefix covers %s and whose rights include %q: an entry of the server's tokens file (ESKV_TOKENS_FILE) such as {\"prefix\":\"%s\",\"rights\":[\"read\",\"write\"]}; the local dev token (%s) may read and write every tenant/",
			subject, right, tenantOf(subject), devTokenFile)
	case events.EUnavailable:
		return exitServer, "the key's partition is moving between writers or catching up, and kvctl's retries ran out: retry in a few seconds; repeat a write with the same --request-id so one that did commit is not applied twice"
	case events.ELockHeld:
		return exitUnavailable, "the lock is held by another owner: retry later"
	}
	if errors.Is(err, client.ErrUnexpectedAnswer) {
		return exitServer, "check that --url (" + a.url + ") points at eskv's API and not at another service"
	}
	return exitServer, "the server failed; its log has the detail. Retry, and report it if it persists"
}

// invalidSolution says how to fix the field the server rejected, in
// kvctl's terms.
func invalidSolution(field, cmd string) string {
	switch field {
	case "key":
		return "keys look like tenant/<tenant>/project/<project>/<path>: lowercase a-z 0-9 - _ . components joined by /, at most 128 characters"
	case "prefix":
		return "a list prefix starts with tenant/<tenant>/project/<project>/, e.g. tenant/acme/project/demo/"
	case "value":
		return "the value must be JSON (quote text: '\"hello\"')"
	case "expectedVersion":
		return "--expected-version is 0 (the key must not exist) or a positive version"
	case "ttlSeconds", "semantics.ttlSeconds":
		return "--ttl is between 1s and 10 years (87600h); leave it out for no expiry"
	case "semantics.purpose":
		return "--purpose is one of " + strings.Join(events.Purposes, ", ")
	case "semantics.producer":
		return "--producer is at most 128 characters"
	case "semantics.consumerHints":
		return "give at most 32 --hint values, each 1 to 128 characters"
	case "requestId":
		return "--request-id is at most 128 characters"
	case "specRef":
		return "--spec-ref is at most 512 characters"
	case "limit":
		return "--limit is between 1 and 1000"
	case "cursor":
		return "--cursor takes the nextCursor of an earlier page of the same prefix"
	}
	return fmt.Sprintf("see '%s --help'", cmd)
}

// scopeOf returns tenant/<t>/project/<p>/ of a key, or the key itself.
func scopeOf(key string) string {
	parts := strings.SplitN(key, "/", 5)
	if len(parts) < 5 {
		return key
	}
	return strings.Join(parts[:4], "/") + "/"
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
