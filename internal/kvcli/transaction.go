package kvcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/contract"
)

// transactionLong is kvctl transaction's help.
var transactionLong = `Apply the operations of a JSON file to keys of one project atomically:
either every operation applies (each written key gets one new version, all
in one Kafka transaction sharing one transaction id) or none does. Up to
` + fmt.Sprint(contract.MaxTxnOps) + ` operations; each key at most once.

The file (--file PATH, or --file - for stdin) is a JSON array of
operations, as the kvstore seed writes them:

  [{"op":"set","key":"account/balance","value":1000,"condition":"attribute_not_exists(PK)"},
   {"op":"inc","key":"counter/transactions","by":1},
   {"op":"delete","key":"temp/lock","condition":"attribute_exists(PK)"}]

or the API's body {"requestId":"...","ops":[...]}. Ops: set (or put),
inc (or increment; by defaults to 1, and inc creates a missing counter
from 0 as DynamoDB's ADD does unless "create":false; "min" and "max"
bound its result, checked by the server), dec, delete, patch
("set":{...},"unset":[...]) and check (a condition alone; writes
nothing). Conditions: "attribute_not_exists(PK)", "attribute_exists(PK)",
or an object {"version":N} (also "expectedVersion"; 0: must not exist),
{"exists":true|false}, {"field":"F","equals":JSON}; "expectedVersion":N
on the op itself is short for {"version":N}.

Keys that do not start with tenant/ are paths inside the namespace
(--table, or its alias --project; KVSTORE_TABLE, KVCTL_NAMESPACE,
KVCTL_PROJECT), e.g. --table tenant/acme/project/demo.

Exit codes: 0 applied; 1 a condition failed (the message names the op's
index and key; nothing was applied); 2 a malformed file or operation; 3
server or network error. --format text prints one line per op, json the
answer ({"txnId":...,"results":[...]}), value each op's value (null when
it has none).`

// transactionCommand is kvctl transaction: the ops of a file applied
// atomically through POST /v1/txn (client.Txn).
func (a *app) transactionCommand() *cobra.Command {
	var (
		file, requestID string
	)
	cmd := &cobra.Command{
		Use:     "transaction --file FILE",
		Aliases: []string{"txn"},
		Short:   "Apply several writes of one project atomically",
		Long:    transactionLong,
		Example: `  kvctl transaction --file tx.json --project tenant/acme/project/demo
  echo '[{"op":"inc","key":"total-requests","by":1},{"op":"inc","key":"ok-requests","by":1}]' | KVCTL_PROJECT=tenant/acme/project/demo kvctl transaction --file -
  kvctl transaction --file transfer.json --request-id transfer-42 --format json   # safe to repeat`,
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) == 0 {
				return nil
			}
			return &usageError{msg: fmt.Sprintf("kvctl transaction takes no arguments (got %d): the operations come from --file", len(got)),
				solution: "give the file with --file PATH, or --file - for stdin", cmd: cmd.CommandPath()}
		},
		Annotations: apiAnnotation,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.right = "write"
			raw, source, err := a.readTxnFile(file)
			if err != nil {
				return err
			}
			body, err := parseTxnFile(raw, a.ns)
			if err != nil {
				return &usageError{msg: fmt.Sprintf("%s: %v", source, err), solution: txnSolution(err), cmd: a.cmdPath}
			}
			if requestID != "" {
				body.RequestID = requestID
			}
			if err := body.Validate(); err != nil {
				msg := err.Error()
				if e := (*contract.Error)(nil); errors.As(err, &e) {
					msg = e.Message
				}
				return &usageError{msg: fmt.Sprintf("%s: %s", source, msg), solution: txnSolution(err), cmd: a.cmdPath}
			}
			ans, err := a.client.Txn(cmd.Context(), body)
			if err != nil {
				return a.txnFailed(err, &body)
			}
			a.noteReplayed(ans.Replayed, body.RequestID, "written")
			return a.writeTxn(&body, ans)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "the operations: a JSON file, or - for stdin (required)")
	f.StringVar(&requestID, "request-id", "", "idempotency id of the whole transaction: repeating it is answered as a replay and applies nothing twice (overrides the file's requestId)")
	return cmd
}

// readTxnFile reads --file (or stdin for -) and says where it came from.
func (a *app) readTxnFile(file string) ([]byte, string, error) {
	var (
		b   []byte
		err error
	)
	switch file {
	case "":
		return nil, "", &usageError{msg: "no --file given", solution: "give the operations with --file tx.json, or --file - to read them from stdin", cmd: a.cmdPath}
	case "-":
		b, err = io.ReadAll(a.stdin)
		file = "stdin"
	default:
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, "", &usageError{msg: fmt.Sprintf("read %s: %v", file, err), solution: "give a readable file with --file PATH, or --file - for stdin", cmd: a.cmdPath}
	}
	return b, file, nil
}

// txnFileOp is one operation as a transaction file writes it: the seed's
// members (op set|inc|delete, key, value, by, condition as a DynamoDB
// expression) and the API's (contract.TxnOp, with a condition object).
type txnFileOp struct {
	Op              string          `json:"op"`
	Key             string          `json:"key"`
	Condition       json.RawMessage `json:"condition"`
	ExpectedVersion *int64          `json:"expectedVersion"`

	Value      json.RawMessage            `json:"value"`
	TTLSeconds *int64                     `json:"ttlSeconds"`
	KeepTTL    bool                       `json:"keepTtl"`
	Semantics  *contract.Semantics        `json:"semantics"`
	SpecRef    string                     `json:"specRef"`
	By         *int64                     `json:"by"`
	Min        *int64                     `json:"min"`
	Max        *int64                     `json:"max"`
	Create     *bool                      `json:"create"`
	Set        map[string]json.RawMessage `json:"set"`
	Unset      []string                   `json:"unset"`
}

// txnFileCondition is a condition object: contract.Condition, whose
// version may also be named expectedVersion.
type txnFileCondition struct {
	Version         *int64          `json:"version"`
	ExpectedVersion *int64          `json:"expectedVersion"`
	Exists          *bool           `json:"exists"`
	Field           string          `json:"field"`
	Equals          json.RawMessage `json:"equals"`
}

// txnFileError is a malformed transaction file: what is wrong, and the
// op it is in (-1: the file as a whole).
type txnFileError struct {
	op  int
	msg string
}

func (e *txnFileError) Error() string {
	if e.op < 0 {
		return e.msg
	}
	return fmt.Sprintf("op %d: %s", e.op, e.msg)
}

// seedOps maps the op names a transaction file may use to the API's.
var seedOps = map[string]contract.Op{
	"set": contract.OpPut, "put": contract.OpPut,
	"inc": contract.OpIncrement, "increment": contract.OpIncrement, "dec": contract.OpIncrement,
	"delete": contract.OpDelete, "patch": contract.OpPatch, "check": contract.OpCheck,
}

// parseTxnFile reads a transaction file (an array of ops, or the API's
// body) into the API's body; keys that do not start with tenant/ are
// paths in the namespace ns. Member names are exact and unknown members are
// refused, so a typo never drops a condition silently.
func parseTxnFile(raw []byte, ns namespace) (contract.TxnBody, error) {
	var body struct {
		RequestID string            `json:"requestId"`
		Ops       []json.RawMessage `json:"ops"`
	}
	trimmed := bytes.TrimSpace(raw)
	switch {
	case len(trimmed) == 0:
		return contract.TxnBody{}, &txnFileError{op: -1, msg: "the file is empty"}
	case trimmed[0] == '[':
		if err := json.Unmarshal(trimmed, &body.Ops); err != nil {
			return contract.TxnBody{}, &txnFileError{op: -1, msg: "not a JSON array of operations: " + jsonProblem(err)}
		}
	case trimmed[0] == '{':
		if err := strictDecode(trimmed, &body); err != nil {
			return contract.TxnBody{}, &txnFileError{op: -1, msg: "not a transaction body {\"requestId\":...,\"ops\":[...]}: " + jsonProblem(err)}
		}
	default:
		return contract.TxnBody{}, &txnFileError{op: -1, msg: "not JSON: a transaction file is an array of operations [{\"op\":...,\"key\":...}, ...]"}
	}
	if len(body.Ops) == 0 {
		return contract.TxnBody{}, &txnFileError{op: -1, msg: "the file has no operations"}
	}
	b := contract.TxnBody{RequestID: body.RequestID, Ops: make([]contract.TxnOp, len(body.Ops))}
	for i, r := range body.Ops {
		op, err := parseTxnFileOp(r, ns)
		if err != nil {
			return contract.TxnBody{}, &txnFileError{op: i, msg: err.Error()}
		}
		b.Ops[i] = op
	}
	return b, nil
}

// parseTxnFileOp reads one op of a transaction file.
func parseTxnFileOp(raw json.RawMessage, ns namespace) (contract.TxnOp, error) {
	var f txnFileOp
	if err := strictDecode(raw, &f); err != nil {
		return contract.TxnOp{}, errors.New(jsonProblem(err))
	}
	op, ok := seedOps[f.Op]
	if !ok {
		return contract.TxnOp{}, fmt.Errorf("op %q is not one of set, inc, dec, delete, patch, check (or put, increment)", f.Op)
	}
	key, err := resolveKey(f.Key, ns)
	if err != nil {
		return contract.TxnOp{}, err
	}
	o := contract.TxnOp{Op: op, Key: key, Value: f.Value, TTLSeconds: f.TTLSeconds, KeepTTL: f.KeepTTL, Semantics: f.Semantics,
		SpecRef: f.SpecRef, By: f.By, Min: f.Min, Max: f.Max, Set: f.Set, Unset: f.Unset}
	if f.Create != nil {
		o.Create = *f.Create
	}
	if f.Op == "inc" || f.Op == "dec" {
		// The seed's inc is DynamoDB's ADD: a missing counter starts
		// from 0 unless the file says "create": false.
		if f.Create == nil {
			o.Create = true
		}
		if o.By == nil {
			one := int64(1)
			o.By = &one
		}
		if f.Op == "dec" {
			neg := -*o.By
			o.By = &neg
		}
	}
	if o.Condition, err = parseTxnCondition(f.Condition); err != nil {
		return contract.TxnOp{}, err
	}
	if f.ExpectedVersion != nil {
		if o.Condition == nil {
			o.Condition = &contract.Condition{}
		}
		if o.Condition.Version != nil && *o.Condition.Version != *f.ExpectedVersion {
			return contract.TxnOp{}, fmt.Errorf("expectedVersion %d contradicts the condition's version %d", *f.ExpectedVersion, *o.Condition.Version)
		}
		o.Condition.Version = f.ExpectedVersion
	}
	return o, nil
}

// DynamoDB condition expressions the seed's files use, and what they
// mean on an eskv key.
var seedConditions = map[string]bool{
	"attribute_exists(PK)":     true,
	"attribute_not_exists(PK)": false,
}

// parseTxnCondition reads a condition: a seed expression (a JSON string)
// or a condition object. Absent or null is no condition.
func parseTxnCondition(raw json.RawMessage) (*contract.Condition, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var expr string
	if json.Unmarshal(raw, &expr) == nil {
		exists, ok := seedConditions[strings.Join(strings.Fields(expr), "")]
		if !ok {
			return nil, fmt.Errorf("condition %q is not a supported expression: use \"attribute_exists(PK)\", \"attribute_not_exists(PK)\" or an object such as {\"version\":3}", expr)
		}
		return &contract.Condition{Exists: &exists}, nil
	}
	var c txnFileCondition
	if err := strictDecode(raw, &c); err != nil {
		return nil, fmt.Errorf("condition: %s", jsonProblem(err))
	}
	if c.Version != nil && c.ExpectedVersion != nil && *c.Version != *c.ExpectedVersion {
		return nil, fmt.Errorf("condition: version %d and expectedVersion %d disagree (give one)", *c.Version, *c.ExpectedVersion)
	}
	if c.Version == nil {
		c.Version = c.ExpectedVersion
	}
	return &contract.Condition{Version: c.Version, Exists: c.Exists, Field: c.Field, Equals: c.Equals}, nil
}

// strictDecode decodes one JSON value into v, refusing unknown members
// and trailing data.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// jsonProblem says what encoding/json found wrong, without the Go type
// names of its messages.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s has the wrong type (a JSON %s)", te.Field, te.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return strings.Replace(msg, "unknown field", "unknown member", 1)
}

// txnSolution says how to fix a malformed transaction file or op.
func txnSolution(err error) string {
	const format = `a transaction file is a JSON array such as [{"op":"set","key":"account/balance","value":1000,"condition":"attribute_not_exists(PK)"},{"op":"inc","key":"counter/transactions","by":1}]; see 'kvctl transaction --help'`
	var (
		fe *txnFileError
		e  *contract.Error
	)
	switch {
	case errors.As(err, &fe) && strings.Contains(fe.msg, "no namespace"):
		return namespaceSolution
	case errors.As(err, &fe) && fe.op >= 0:
		return fmt.Sprintf("fix operation %d of the file (counting from 0); %s", fe.op, format)
	case errors.As(err, &e) && strings.HasSuffix(e.Field, ".key") && strings.Contains(e.Message, "project"):
		return "a transaction changes keys of one project only (one project is one partition, decided by one writer): split it into one transaction per project"
	case errors.As(err, &e) && e.FailedOp != nil:
		member := strings.TrimPrefix(e.Field, fmt.Sprintf("ops[%d].", *e.FailedOp))
		return fmt.Sprintf("fix operation %d of the file (counting from 0): %s", *e.FailedOp, invalidSolution(member, "kvctl transaction"))
	}
	return format
}

// txnFailed explains a refused transaction: an error about one op names
// its index, op and key; a condition that failed says the key's state.
func (a *app) txnFailed(err error, b *contract.TxnBody) error {
	var e *contract.Error
	if !errors.As(err, &e) || e.FailedOp == nil || *e.FailedOp < 0 || *e.FailedOp >= len(b.Ops) {
		return err
	}
	i := *e.FailedOp
	o := b.Ops[i]
	a.subject = o.Key
	if !o.Writes() {
		a.right = "read"
	}
	code, solution := a.solve(err, e)
	switch {
	case e.Code == contract.EInvalid || e.Code == contract.ETooLarge:
		solution = txnSolution(err)
	case e.Code == contract.EConflict && e.Field == "requestId":
		solution = fmt.Sprintf("request id %s was used for another transaction, or this one applied before and %s changed since: nothing was applied; give a new --request-id (repeating an id only replays its identical transaction while it is still its keys' latest write)",
			b.RequestID, o.Key)
	case e.Code == contract.EConflict || e.Code == contract.EFieldMismatch:
		solution = "nothing was applied: re-read the keys and fix the file's conditions, then run it again. " + txnConditionState(o, e)
	}
	tag := e.Code
	if e.CorrelationID != "" {
		tag += ", correlation id " + e.CorrelationID
	}
	msg := fmt.Sprintf("transaction not applied: op %d (%s %s) failed: %s [%s]", i, o.Op, o.Key,
		strings.TrimPrefix(e.Message, fmt.Sprintf("op %d: ", i)), tag)
	return &failure{code: code, msg: msg, solution: solution}
}

// txnConditionState says what the key of a failed condition holds now.
func txnConditionState(o contract.TxnOp, e *contract.Error) string {
	if e.Current == nil {
		return fmt.Sprintf("%s does not exist now (a condition of version 0 or attribute_not_exists(PK) holds)", o.Key)
	}
	s := fmt.Sprintf("%s is at version %d now", o.Key, e.Current.Version)
	if e.Current.Value != nil {
		s += " (value " + shorten(string(e.Current.Value)) + ")"
	}
	return s + fmt.Sprintf(`: {"version":%d} holds`, e.Current.Version)
}

// writeTxn prints an applied transaction's answer in a.format.
func (a *app) writeTxn(b *contract.TxnBody, ans contract.TxnAnswer) error {
	switch a.format {
	case formatJSON:
		return a.writeJSON(ans)
	case formatValue:
		var buf bytes.Buffer
		for _, r := range ans.Results {
			v := r.Value
			if v == nil {
				v = json.RawMessage("null")
			}
			fmt.Fprintf(&buf, "%s\n", v)
		}
		_, err := a.stdout.Write(buf.Bytes())
		return err
	}
	lines := []string{fmt.Sprintf("transaction %s applied: %d ops", ans.TxnID, len(ans.Results))}
	for i, r := range ans.Results {
		op := contract.Op("?")
		if i < len(b.Ops) {
			op = b.Ops[i].Op
		}
		switch {
		case op == contract.OpCheck && r.Version == 0:
			lines = append(lines, fmt.Sprintf("%-9s %s absent", op, r.Key))
		case op == contract.OpDelete:
			lines = append(lines, fmt.Sprintf("%-9s %s deleted, version %d", op, r.Key, r.Version))
		default:
			lines = append(lines, fmt.Sprintf("%-9s %s version %d", op, r.Key, r.Version))
		}
	}
	var buf strings.Builder
	for _, l := range lines {
		buf.WriteString(printable(l) + "\n")
	}
	_, err := io.WriteString(a.stdout, buf.String())
	return err
}
