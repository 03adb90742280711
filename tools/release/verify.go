package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// want is what verify expects of an archive.
type want struct {
	name, version, revision string
	platforms               []string // architectures, linux
}

// verifyArchive reads the OCI archive at path back and checks it: one
// index named with the version's tag; every blob's digest and size as its
// descriptors say (validate.Index); one image per expected architecture,
// whose config runs the binary as 65532:65532 with the labels; whose
// files are the CA certificates, /etc/passwd naming 65532, and the
// binary, an ELF of the image's architecture that is statically linked
// (no interpreter); on this machine's architecture the binary runs and
// its --version names the version and revision.
func verifyArchive(path string, w want) error {
	dir, err := os.MkdirTemp("", "eskv-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := untar(path, dir); err != nil {
		return err
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	rm, err := root.IndexManifest()
	if err != nil {
		return err
	}
	if len(rm.Manifests) != 1 || rm.Manifests[0].Annotations[refName] != tag(w.version) {
		return fmt.Errorf("index.json: want one index named %q, got %+v", tag(w.version), rm.Manifests)
	}
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil {
		return err
	}
	if err := validate.Index(idx); err != nil {
		return fmt.Errorf("index %s: %w", rm.Manifests[0].Digest, err)
	}
	if d, err := idx.Digest(); err != nil || d != rm.Manifests[0].Digest {
		return fmt.Errorf("index digest %s (%v), index.json says %s", d, err, rm.Manifests[0].Digest)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	var archs []string
	for _, desc := range im.Manifests {
		if desc.Platform == nil || desc.Platform.OS != "linux" {
			return fmt.Errorf("manifest %s: platform %v, want linux", desc.Digest, desc.Platform)
		}
		archs = append(archs, desc.Platform.Architecture)
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return err
		}
		if d, err := img.Digest(); err != nil || d != desc.Digest {
			return fmt.Errorf("image %s: digest %s (%v)", desc.Digest, d, err)
		}
		if err := verifyImage(img, desc.Platform.Architecture, w); err != nil {
			return fmt.Errorf("%s/%s: %w", w.name, desc.Platform.Architecture, err)
		}
	}
	slices.Sort(archs)
	if !slices.Equal(archs, slices.Sorted(slices.Values(w.platforms))) {
		return fmt.Errorf("architectures %v, want %v", archs, w.platforms)
	}
	return nil
}

// verifyImage checks one image's config and files.
func verifyImage(img v1.Image, arch string, w want) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cf.OS != "linux" || cf.Architecture != arch {
		return fmt.Errorf("config platform %s/%s", cf.OS, cf.Architecture)
	}
	c := cf.Config
	if c.User != user {
		return fmt.Errorf("config user %q, want %q", c.User, user)
	}
	if !slices.Equal(c.Entrypoint, []string{entrypoint}) || len(c.Cmd) != 0 {
		return fmt.Errorf("entrypoint %q cmd %q, want [%s]", c.Entrypoint, c.Cmd, entrypoint)
	}
	for k, v := range map[string]string{"version": w.version, "revision": w.revision, "licenses": license, "title": "eskv-" + w.name} {
		if got := c.Labels[labelPfx+k]; got != v {
			return fmt.Errorf("label %s%s = %q, want %q", labelPfx, k, got, v)
		}
	}
	if !strings.HasPrefix(c.Labels[labelPfx+"source"], "https://") {
		return fmt.Errorf("label %ssource = %q", labelPfx, c.Labels[labelPfx+"source"])
	}
	files, err := imageFiles(img)
	if err != nil {
		return err
	}
	if !bytes.Contains(files[caCerts], []byte("BEGIN CERTIFICATE")) {
		return fmt.Errorf("no CA certificates at /%s", caCerts)
	}
	if !bytes.Contains(files[passwd], []byte(":65532:65532:")) {
		return fmt.Errorf("/%s does not name user 65532", passwd)
	}
	return checkBinary(files[strings.TrimPrefix(entrypoint, "/")], arch, w)
}

// imageFiles reads the regular files of img's flattened filesystem.
func imageFiles(img v1.Image) (map[string][]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Name == strings.TrimPrefix(entrypoint, "/") && (h.Mode&0o111 == 0 || h.Mode&0o022 != 0 || h.Uid != 0) {
			return nil, fmt.Errorf("%s: mode %o owner %d, want executable, owned by root, written by nobody else", entrypoint, h.Mode, h.Uid)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			return nil, err
		}
	}
}

// elfMachines are the ELF machines of the architectures images are built for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkBinary checks that bin is a static ELF of arch and, when this
// machine can run it, that its --version says the version and revision.
func checkBinary(bin []byte, arch string, w want) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s: %w", entrypoint, err)
	}
	defer f.Close()
	if f.Machine != elfMachines[arch] {
		return fmt.Errorf("%s: ELF machine %s, want %s's", entrypoint, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked (PT_INTERP): scratch has no loader; build with CGO_ENABLED=0", entrypoint)
		}
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != arch {
		return nil
	}
	dir, err := os.MkdirTemp("", "eskv-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, w.name)
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		return err
	}
	out, err := exec.Command(p, "--version").Output()
	if want := fmt.Sprintf("%s %s (revision %s, ", w.name, w.version, w.revision); err != nil || !strings.HasPrefix(string(out), want) {
		return fmt.Errorf("%s --version: %v, %q; want %q…", entrypoint, err, out, want)
	}
	return nil
}

// untar extracts the archive at path into dir.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(os.PathSeparator)) {
			return fmt.Errorf("%s: entry %q leaves the archive", path, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		default:
			err = fmt.Errorf("%s: entry %q of type %c", path, h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

// verifyCommand is release verify.
func verifyCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var w want
	var platforms string
	fs.StringVar(&w.name, "name", "", "the command the image runs")
	fs.StringVar(&w.version, "version", "", "the release version the image must carry")
	fs.StringVar(&w.revision, "revision", "", "the VCS revision the image must carry")
	fs.StringVar(&platforms, "arch", "amd64,arm64", "the architectures the index must hold, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if w.name == "" || w.version == "" || w.revision == "" || fs.NArg() != 1 {
		return fmt.Errorf("usage: release verify -name N -version V -revision R ARCHIVE")
	}
	w.platforms = strings.Split(platforms, ",")
	if err := verifyArchive(fs.Arg(0), w); err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	fmt.Fprintf(stdout, "%s: ok (eskv-%s:%s, linux/%s)\n", fs.Arg(0), w.name, tag(w.version), strings.Join(w.platforms, ", linux/"))
	return nil
}
