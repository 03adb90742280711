package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/tools/internal/cli"
)

func TestReadPage(t *testing.T) {
	t.Run("OKFieldsAfterItems", func(t *testing.T) {
		body := `{"items":[{"key":"tenant/bench/project/p/k/00000","value":{"seq":1}}],"count":1,"truncated":true,"nextCursor":"p3.o41.a2V5","position":"p3.o41"}`
		p, err := readPage([]byte(body))
		want := pageInfo{Count: 1, Truncated: true, NextCursor: "p3.o41.a2V5", Position: "p3.o41"}
		if err != nil || p != want {
			t.Errorf("got %+v, %v; want %+v", p, err, want)
		}
	})
	t.Run("OKLastPageEmpty", func(t *testing.T) {
		p, err := readPage([]byte(`{"items":[],"count":0,"truncated":false,"position":"p3.o41"}`))
		if err != nil || p != (pageInfo{Position: "p3.o41"}) {
			t.Errorf("got %+v, %v", p, err)
		}
	})
	t.Run("ErrNoCount", func(t *testing.T) {
		if _, err := readPage([]byte(`{"error":{"code":"invalid"}}`)); err == nil {
			t.Error("want an error")
		}
	})
}

func TestCheckBatch(t *testing.T) {
	entry := &contract.Entry{Key: "k"}
	ok := contract.BatchGetAnswer{Items: []contract.BatchGetItem{{Key: "a", Entry: entry}, {Key: "b", Entry: entry}}}
	if err := checkBatch(ok, 2, http.StatusOK, nil); err != nil {
		t.Errorf("OK: %v", err)
	}
	missing := contract.BatchGetAnswer{Items: []contract.BatchGetItem{{Key: "a", Entry: entry},
		{Key: "b", Error: &contract.ErrorDetail{Code: "not_found"}}}}
	for name, err := range map[string]error{
		"ErrStatus":    checkBatch(ok, 2, http.StatusServiceUnavailable, nil),
		"ErrTruncated": checkBatch(contract.BatchGetAnswer{Items: ok.Items[:1], Truncated: true}, 2, http.StatusOK, nil),
		"ErrNoEntry":   checkBatch(missing, 2, http.StatusOK, nil),
	} {
		if err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestJudgeAt(t *testing.T) {
	t.Run("UnavailableWhenRefused", func(t *testing.T) {
		// What a writer without reads of the past answers.
		body := `{"error":{"code":"invalid","message":"unknown query parameter \"at\" (prefix, limit, cursor, keysOnly, field, op, value)","field":"at"}}`
		unavailable, err := judgeAt(http.StatusBadRequest, []byte(body))
		if err != nil || !strings.Contains(unavailable, `unknown query parameter "at"`) {
			t.Errorf("got %q, %v", unavailable, err)
		}
	})
	list := func(values ...string) []byte {
		a := contract.ListAnswer{Count: len(values)}
		for _, v := range values {
			a.Items = append(a.Items, contract.Entry{Key: "k", Value: json.RawMessage(v)})
		}
		b, _ := json.Marshal(a)
		return b
	}
	t.Run("OKPastValues", func(t *testing.T) {
		// jsonb renders {"seq":1} with a space.
		if u, err := judgeAt(http.StatusOK, list(`{"seq":1}`, `{"seq": 1}`)); u != "" || err != nil {
			t.Errorf("got %q, %v", u, err)
		}
	})
	t.Run("ErrCurrentValue", func(t *testing.T) {
		if u, err := judgeAt(http.StatusOK, list(`{"seq":1}`, `{"seq":2}`)); u != "" || err == nil {
			t.Errorf("got %q, %v; want an error", u, err)
		}
	})
	t.Run("ErrOtherRefusal", func(t *testing.T) {
		body := `{"error":{"code":"invalid","message":"another partition","field":"cursor"}}`
		if u, err := judgeAt(http.StatusBadRequest, []byte(body)); u != "" || err == nil {
			t.Errorf("got %q, %v; want an error", u, err)
		}
	})
}

func TestParseManyReads(t *testing.T) {
	cli.SetEnv(t, nil)
	c, err := parse([]string{"-only", "19,20,21", "-many-n", "7"}, io.Discard)
	if err != nil || !c.wants("19") || !c.wants("20") || !c.wants("21") || c.wants("4") || c.manyN != 7 {
		t.Errorf("got %+v, %v", c, err)
	}
	if _, err := parse([]string{"-many-n", "0"}, io.Discard); err == nil {
		t.Error("-many-n 0: want an error")
	}
}
