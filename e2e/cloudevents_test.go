package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/testenv"
)

// ceHeaders are the CloudEvents Kafka protocol binding's binary mode
// (spec 1.0, kafka-protocol-binding.md §3.2): attributes are headers
// prefixed "ce_", datacontenttype is the content-type header.
var ceHeaders = spec.WithPrefix("ce_")

// ceRecord reads a Kafka record as a CloudEvents binary-mode message, as
// sdk-go's Kafka bindings do, so binding.ToEvent builds the event the
// way any CloudEvents consumer of the topics would.
type ceRecord struct{ r *kgo.Record }

func (m ceRecord) header(name string) (string, bool) {
	for _, h := range m.r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

func (m ceRecord) ReadEncoding() binding.Encoding {
	if _, ok := m.header(ceHeaders.PrefixedSpecVersionName()); ok {
		return binding.EncodingBinary
	}
	return binding.EncodingUnknown
}

func (m ceRecord) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

// GetAttribute and GetExtension make ceRecord a
// binding.MessageMetadataReader, which ToEvent needs for a binary message.
func (m ceRecord) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	sv, _ := m.header(ceHeaders.PrefixedSpecVersionName())
	version := ceHeaders.Version(sv)
	if version == nil {
		return nil, nil
	}
	a := version.AttributeFromKind(k)
	if a == nil {
		return nil, nil
	}
	name := a.PrefixedName()
	if k == spec.DataContentType {
		name = "content-type"
	}
	if v, ok := m.header(name); ok {
		return a, v
	}
	return a, nil
}

func (m ceRecord) GetExtension(name string) any {
	if v, ok := m.header(ceHeaders.Prefix() + name); ok {
		return v
	}
	return nil
}

func (m ceRecord) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	sv, ok := m.header(ceHeaders.PrefixedSpecVersionName())
	if !ok {
		return binding.ErrNotBinary
	}
	version := ceHeaders.Version(sv)
	if version == nil {
		return binding.ErrUnknownEncoding
	}
	for _, h := range m.r.Headers {
		var err error
		switch {
		case h.Key == "content-type":
			err = w.SetAttribute(version.AttributeFromKind(spec.DataContentType), string(h.Value))
		case strings.HasPrefix(h.Key, ceHeaders.Prefix()):
			if a := version.Attribute(h.Key); a != nil {
				err = w.SetAttribute(a, string(h.Value))
			} else {
				err = w.SetExtension(strings.TrimPrefix(h.Key, ceHeaders.Prefix()), string(h.Value))
			}
		}
		if err != nil {
			return err
		}
	}
	return w.SetData(bytes.NewReader(m.r.Value))
}

// TestCloudEventsBinding: every record the writer produces on kv.changes
// (puts, a delete, a set's element change) and on
// kv.conflicts (a failed CAS) is a valid CloudEvents 1.0 binary-mode
// Kafka message: sdk-go's binding builds an event from its headers and
// event.Validate accepts it, with source, time, content type and data
// schema set.
func TestCloudEventsBinding(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	for _, w := range []struct{ method, path, body string }{
		{"PUT", base + "ce/a", `{"value":1}`},
		{"PUT", base + "ce/a", `{"value":2,"expectedVersion":1}`},
		{"PUT", base + "ce/a", `{"value":3,"expectedVersion":1}`}, // conflict
		{"DELETE", base + "ce/a", ``},
		{"POST", base + "ce/set:sadd", `{"member":"m"}`},
	} {
		if r := s.do(w.method, w.path, devToken, w.body); r.Status >= 500 {
			t.Fatalf("%s %s: %d %s", w.method, w.path, r.Status, r.Body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.broker.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []struct{ name, schema, typePrefix string }{
		{s.broker.Topics.Changes, "change.v1.json", "io.eskv.kv."},
		{s.broker.Topics.Conflicts, "conflict.v1.json", "io.eskv.kv.conflict"},
	} {
		n := 0
		for p, end := range testenv.EndOffsets(ctx, t, cl, topic.name) {
			err := changelog.ReadCommitted(ctx, cl, changelog.Range{Topic: topic.name, Partition: p, From: 0, End: end}, func(r *kgo.Record) error {
				n++
				checkCloudEvent(t, r, topic.schema, topic.typePrefix)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if n == 0 {
			t.Errorf("%s: no records", topic.name)
		}
	}
}

// checkCloudEvent builds the CloudEvent of r through the binding and
// validates it.
func checkCloudEvent(t *testing.T, r *kgo.Record, schema, typePrefix string) {
	t.Helper()
	at := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
	e, err := binding.ToEvent(context.Background(), ceRecord{r})
	if err != nil {
		t.Fatalf("%s/%d: not a CloudEvents binary-mode message: %v", at, r.Offset, err)
	}
	if err := e.Validate(); err != nil {
		t.Fatalf("%s/%d: %v", at, r.Offset, err)
	}
	if e.SpecVersion() != event.CloudEventsVersionV1 || e.Source() == "" || e.ID() == "" ||
		!strings.HasPrefix(e.Type(), typePrefix) || e.Time().IsZero() || e.DataContentType() != "application/json" ||
		!strings.HasSuffix(e.DataSchema(), "/"+schema) || e.Subject() == "" {
		t.Errorf("%s/%d: attributes %s", at, r.Offset, e.Context)
	}
	if !bytes.Equal(e.Data(), r.Value) {
		t.Errorf("%s/%d: data differs from the record's value", at, r.Offset)
	}
}
