package testenv

import "testing"

func TestMustBrokerCreatesTopics(t *testing.T) {
	b := MustBroker(t, 4)
	if len(b.Addrs) != 1 {
		t.Fatalf("want one broker address, got %v", b.Addrs)
	}
}
