package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed shape, which verify checks.
const (
	// entrypoint is where the command's static binary is, as
	// deploy/Dockerfile puts it: the chart passes arguments only.
	entrypoint = "/eskv"
	// user is the non-root user and group the process runs as, as the
	// chart's securityContext (runAsUser, runAsGroup) says.
	user     = "65532:65532"
	caCerts  = "etc/ssl/certs/ca-certificates.crt"
	passwd   = "etc/passwd"
	group    = "etc/group"
	license  = "Apache-2.0"
	labelPfx = "org.opencontainers.image."
	refName  = labelPfx + "ref.name"
)

// passwdFile and groupFile name root and the non-root user 65532
// (nonroot, as distroless names it), so that tools resolving the user
// find it; the process never reads them.
const (
	passwdFile = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	groupFile  = "root:x:0:\nnonroot:x:65532:\n"
)

// imageSpec is one command's image: its binaries by architecture (all
// linux, static), the CA certificates to trust and what the labels say.
type imageSpec struct {
	name, version, revision, source string
	created                         time.Time
	caCerts                         []byte
	binaries                        map[string]string // architecture → path
	user                            string            // user, unless a test makes a bad image
}

// tag is the image's tag: the version without its leading v, as the
// chart's image.tag (v1.2.3 → 1.2.3).
func tag(version string) string { return strings.TrimPrefix(version, "v") }

// labels are the image's OCI labels (and its index's annotations).
func (s imageSpec) labels() map[string]string {
	return map[string]string{
		labelPfx + "title":       "eskv-" + s.name,
		labelPfx + "version":     s.version,
		labelPfx + "revision":    s.revision,
		labelPfx + "source":      s.source,
		labelPfx + "licenses":    license,
		labelPfx + "created":     s.created.UTC().Format(time.RFC3339),
		labelPfx + "description": "eskv " + s.name + " (an event-sourced multi-tenant key-value store)",
	}
}

// index builds the image index: one image per architecture on an empty
// base (scratch), a layer of the CA certificates and /etc/passwd, and a
// layer of the binary.
func (s imageSpec) index() (v1.ImageIndex, error) {
	base, err := tarLayer(s.created, []tarFile{
		{name: "etc/", dir: true},
		{name: "etc/ssl/", dir: true},
		{name: "etc/ssl/certs/", dir: true},
		{name: passwd, data: []byte(passwdFile), mode: 0o644},
		{name: group, data: []byte(groupFile), mode: 0o644},
		{name: caCerts, data: s.caCerts, mode: 0o644},
	})
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range slices.Sorted(maps.Keys(s.binaries)) {
		bin, err := os.ReadFile(s.binaries[arch])
		if err != nil {
			return nil, err
		}
		binLayer, err := tarLayer(s.created, []tarFile{{name: strings.TrimPrefix(entrypoint, "/"), data: bin, mode: 0o755}})
		if err != nil {
			return nil, err
		}
		img, err := s.image(arch, base, binLayer)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", s.name, arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return mutate.Annotations(idx, s.labels()).(v1.ImageIndex), nil
}

// image is the image of one architecture.
func (s imageSpec) image(arch string, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: s.created}
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.User = s.user
	cf.Config.Labels = s.labels()
	cf.Config.Env = []string{"PATH=/"}
	return mutate.ConfigFile(img, cf)
}

// tarFile is one entry of a layer.
type tarFile struct {
	name string
	data []byte
	mode int64
	dir  bool
}

// tarLayer is a gzipped layer of files, owned by root, dated created,
// so that the same inputs make the same digests.
func tarLayer(created time.Time, files []tarFile) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// writeArchive writes idx as an OCI image layout whose index.json names
// it with the tag (org.opencontainers.image.ref.name), tarred into path:
// an oci-archive, as skopeo, podman and crane read it.
func writeArchive(path, tag string, idx v1.ImageIndex, created time.Time) error {
	dir, err := os.MkdirTemp("", "eskv-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: tag})); err != nil {
		return err
	}
	return tarDir(dir, path, created)
}

// tarDir tars the files under dir into path, sorted, dated created.
func tarDir(dir, path string, created time.Time) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: created, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(b))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// imageCommand is release image.
func imageCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := imageSpec{binaries: map[string]string{}, user: user}
	var out, certs string
	var epoch int64
	fs.StringVar(&s.name, "name", "", "the command (writer, projector, auditor, kvctl, kvstore)")
	fs.StringVar(&s.version, "version", "", "the release version (v1.2.3)")
	fs.StringVar(&s.revision, "revision", "", "the VCS revision")
	fs.StringVar(&s.source, "source", "https://github.com/eskv/eskv", "the source repository's URL")
	fs.Int64Var(&epoch, "created", 0, "creation time, Unix seconds (SOURCE_DATE_EPOCH: the commit's time)")
	fs.StringVar(&certs, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates bundle to put in the image")
	fs.StringVar(&out, "out", "", "the OCI archive to write")
	fs.Func("bin", "ARCH=PATH: the linux binary of an architecture (repeat)", func(v string) error {
		arch, path, ok := strings.Cut(v, "=")
		if !ok || arch == "" || path == "" {
			return fmt.Errorf("want ARCH=PATH, got %q", v)
		}
		s.binaries[arch] = path
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.name == "" || s.version == "" || s.revision == "" || out == "" || len(s.binaries) == 0 {
		return fmt.Errorf("-name, -version, -revision, -out and -bin are required")
	}
	s.created = time.Unix(epoch, 0).UTC()
	var err error
	if s.caCerts, err = os.ReadFile(certs); err != nil {
		return fmt.Errorf("CA certificates: %w (apt-get install ca-certificates)", err)
	}
	idx, err := s.index()
	if err != nil {
		return err
	}
	if err := writeArchive(out, tag(s.version), idx, s.created); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s:%s %s\n", out, "eskv-"+s.name, tag(s.version), d)
	return nil
}
