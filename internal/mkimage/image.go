package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// options are mkimage's flags and arguments.
type options struct {
	out, version, revision, ca, name string
	created                          time.Time
	binaries                         []platformBinary
}

// platformBinary is the tollgate binary of one platform.
type platformBinary struct{ os, arch, file string }

// The image's user (distroless's "nonroot") and the directory the
// embedded store writes to.
const (
	uid     = 65532
	dataDir = "data"
)

// Entrypoint and Cmd: `tollgate serve` on every interface, its store in
// the data directory (a volume). Beyond loopback the server refuses to
// start without API keys (--keys, or keys in the store) unless told
// --allow-unauthenticated: docs/operations.md says how to give them.
var (
	entrypoint = []string{"/tollgate"}
	cmd        = []string{"serve", "--addr", "0.0.0.0:8080", "--store", "embedded:/" + dataDir + "/tollgate.db"}
)

// build writes the archive o describes.
func build(o options) error {
	ca, err := os.ReadFile(o.ca)
	if err != nil {
		return fmt.Errorf("CA certificates: %w (install the ca-certificates package, or give -ca)", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range o.binaries {
		img, err := platformImage(o, b, ca)
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: b.os, Architecture: b.arch}}})
	}
	dir, err := os.MkdirTemp(filepath.Dir(o.out), ".mkimage-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// docker load names the image by io.containerd.image.name, podman and
	// skopeo by org.opencontainers.image.ref.name.
	ann := map[string]string{
		"io.containerd.image.name":          o.name + ":" + o.version,
		"org.opencontainers.image.ref.name": o.version,
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(ann)); err != nil {
		return err
	}
	return tarDir(dir, o.out, o.created)
}

// platformImage is the image of one platform: one layer on nothing.
func platformImage(o options, b platformBinary, ca []byte) (v1.Image, error) {
	bin, err := os.ReadFile(b.file)
	if err != nil {
		return nil, err
	}
	files, err := rootFS(bin, ca, o.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(files)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = b.os, b.arch, v1.Time{Time: o.created}
	cfg.Config = v1.Config{
		Entrypoint:   entrypoint,
		Cmd:          cmd,
		User:         fmt.Sprintf("%d:%d", uid, uid),
		WorkingDir:   "/" + dataDir,
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
		Volumes:      map[string]struct{}{"/" + dataDir: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "tollgate",
			"org.opencontainers.image.version":  o.version,
			"org.opencontainers.image.revision": o.revision,
			"org.opencontainers.image.licenses": "MIT",
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// rootFS is the layer's tar: the binary, the CA bundle, the user and
// group files, and the data directory the user owns.
func rootFS(bin, ca []byte, at time.Time) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/%s:/sbin/nologin\n", uid, uid, dataDir)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	entries := []struct {
		name string
		mode int64
		uid  int
		data []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{name: dataDir + "/", mode: 0o755, uid: uid, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "tollgate", mode: 0o755, data: bin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: at, Format: tar.FormatPAX,
			Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir to a tar archive at out (replacing
// it, through a temporary file), in name order, all dated at.
func tarDir(dir, out string, at time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		names = append(names, path)
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	tmp, err := os.CreateTemp(filepath.Dir(out), ".mkimage-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	for _, path := range names {
		if err := addFile(tw, dir, path, at); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

func addFile(tw *tar.Writer, dir, path string, at time.Time) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return err
	}
	h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: at, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: info.Size()}
	if info.IsDir() {
		h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
	}
	if err := tw.WriteHeader(h); err != nil || info.IsDir() {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
