package api

import (
	"net/http"
	"strings"

	"github.com/eskv/eskv/contract"
)

// Op labels of the requests that are not an op on a key: listings,
// watches, and the routes outside /v1 (health, readiness, metrics).
const (
	opLabelList     = "list"
	opLabelWatch    = "watch"
	opLabelNone     = "none"
	opLabelBatchGet = "batch_get"
	opLabelProjects = "projects"
)

// opLabel names the operation of a request for the metrics, so latency
// and errors are told apart per verb although every key op shares the
// route /v1/kv/*. It is a name from the op table (contract.Op: get, put,
// delete, patch, sadd, qpop, history, ...), txn, list, batch_get, projects, watch, none (not
// an API route) or otherLabel (an unknown verb): never anything taken
// from the request as it is, so its values stay a fixed set whatever
// clients send.
func opLabel(route, method, path string) string {
	switch route {
	case "/v1/kv/*":
	case "/v1/kv":
		return opLabelList
	case "/v1/txn":
		return string(contract.OpTxn)
	case "/v1/watch":
		return opLabelWatch
	case batchGetRoute, batchGetPath:
		return opLabelBatchGet
	case deleteRangeRoute, deleteRangePath:
		return string(contract.OpDeleteRange)
	case expireDueRoute, expireDuePath:
		return string(contract.OpExpireDue)
	case "/v1/projects":
		return opLabelProjects
	default:
		return opLabelNone
	}
	raw := strings.TrimPrefix(path, "/v1/kv/")
	_, verb := contract.SplitVerb(raw)
	switch method {
	case http.MethodGet:
		if verb == "" {
			return string(contract.OpGet)
		}
		return verbLabel(verb, true)
	case http.MethodPost:
		return verbLabel(verb, false)
	case http.MethodPut:
		return string(contract.OpPut)
	case http.MethodDelete:
		return string(contract.OpDelete)
	case http.MethodPatch:
		return string(contract.OpPatch)
	}
	return otherLabel
}

// verbLabel is the op of a custom method's verb, or otherLabel.
func verbLabel(verb string, read bool) string {
	if op, ok := opOfVerb(verb, read); ok {
		return string(op)
	}
	return otherLabel
}
