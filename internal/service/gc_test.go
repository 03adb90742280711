package service

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, self string
		files      map[string]string
		want       int64
	}{
		{"OKv2", "0::/kubepods/pod1/c1\n", map[string]string{"kubepods/pod1/c1/memory.max": "536870912\n"}, 512 << 20},
		{"OKv2Max", "0::/x\n", map[string]string{"x/memory.max": "max\n"}, 0},
		{"OKv1", "4:memory:/docker/abc\n3:cpu:/\n", map[string]string{"memory/docker/abc/memory.limit_in_bytes": "268435456"}, 256 << 20},
		{"OKv1Unlimited", "4:memory:/a\n", map[string]string{"memory/a/memory.limit_in_bytes": "9223372036854771712"}, 0},
		{"OKNoFile", "4:memory:/gone\n0::/gone\n", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			self := filepath.Join(root, "self-cgroup")
			if err := os.WriteFile(self, []byte(tc.self), 0o644); err != nil {
				t.Fatal(err)
			}
			for name, content := range tc.files {
				p := filepath.Join(root, "fs", name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupMemoryLimit(self, filepath.Join(root, "fs")); got != tc.want {
				t.Fatalf("cgroupMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	if got, from := memoryLimit(0); got != DefaultMemoryLimit || from != "default" {
		t.Errorf("no cgroup limit: %d from %s, want %d from default", got, from, DefaultMemoryLimit)
	}
	if got, from := memoryLimit(512 << 20); got != 429496729 || from != "cgroup" {
		t.Errorf("512 MiB cgroup: %d from %s, want 80%% of it", got, from)
	}
}
