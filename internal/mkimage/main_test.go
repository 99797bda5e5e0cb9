package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The archive is an OCI image layout that names the image, with an index
// of one manifest per platform; the platform's layer holds a static
// tollgate binary stamped with the version, which runs from it; the
// config starts `tollgate serve` as the non-root user; building twice
// gives the same bytes.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tollgate binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tollgate")
	// Static, as make image builds it, and as cmd/tollgate's tests build
	// it (they share the compiled packages).
	gobuild := exec.Command("go", "build", "-ldflags", "-X github.com/tollgate-rl/tollgate/internal/cli.version=v9.8.7-test",
		"-o", bin, "github.com/tollgate-rl/tollgate/cmd/tollgate")
	gobuild.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{out: filepath.Join(dir, "image.tar"), version: "v9.8.7-test", revision: "abc", ca: ca, name: "tollgate",
		created:  time.Unix(1_700_000_000, 0).UTC(),
		binaries: []platformBinary{{os: runtime.GOOS, arch: runtime.GOARCH, file: bin}, {os: "linux", arch: "riscv64", file: bin}}}
	if err := build(o); err != nil {
		t.Fatalf("build: %v", err)
	}
	files := untar(t, o.out)
	if !strings.Contains(string(files["oci-layout"]), `"imageLayoutVersion"`) {
		t.Fatalf("oci-layout = %q", files["oci-layout"])
	}
	var top struct {
		Manifests []struct {
			MediaType   string            `json:"mediaType"`
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	decode(t, files["index.json"], &top)
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations["io.containerd.image.name"] != "tollgate:v9.8.7-test" ||
		top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v9.8.7-test" {
		t.Fatalf("index.json = %s", files["index.json"])
	}
	var idx struct {
		MediaType string `json:"mediaType"`
		Manifests []struct {
			Digest   string `json:"digest"`
			Platform struct {
				OS           string `json:"os"`
				Architecture string `json:"architecture"`
			} `json:"platform"`
		} `json:"manifests"`
	}
	decode(t, blob(t, files, top.Manifests[0].Digest), &idx)
	if idx.MediaType != "application/vnd.oci.image.index.v1+json" || len(idx.Manifests) != 2 {
		t.Fatalf("image index = %+v", idx)
	}
	var manifest struct {
		Config struct{ Digest string } `json:"config"`
		Layers []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"layers"`
	}
	i := slices.IndexFunc(idx.Manifests, func(m struct {
		Digest   string `json:"digest"`
		Platform struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	}) bool {
		return m.Platform.OS == runtime.GOOS && m.Platform.Architecture == runtime.GOARCH
	})
	if i < 0 {
		t.Fatalf("no manifest for %s/%s in %+v", runtime.GOOS, runtime.GOARCH, idx)
	}
	decode(t, blob(t, files, idx.Manifests[i].Digest), &manifest)
	var cfg struct {
		Architecture string `json:"architecture"`
		Config       struct {
			User       string
			Entrypoint []string
			Cmd        []string
			WorkingDir string
			Labels     map[string]string
		} `json:"config"`
	}
	decode(t, blob(t, files, manifest.Config.Digest), &cfg)
	if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{"/tollgate"}) || cfg.Config.Cmd[0] != "serve" ||
		cfg.Config.Labels["org.opencontainers.image.version"] != "v9.8.7-test" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("config = %+v", cfg)
	}
	if len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("layers = %+v", manifest.Layers)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, manifest.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	layer := readTar(t, zr)
	if string(layer["etc/ssl/certs/ca-certificates.crt"]) == "" || !strings.Contains(string(layer["etc/passwd"]), "nonroot:x:65532:") {
		t.Errorf("layer files: %v", keys(layer))
	}
	run := filepath.Join(t.TempDir(), "tollgate")
	if err := os.WriteFile(run, layer["tollgate"], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(run, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "tollgate v9.8.7-test") {
		t.Errorf("the layer's tollgate version: %v\n%s", err, out)
	}

	first, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatal(err)
	}
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(o.out); !bytes.Equal(first, again) {
		t.Error("building the same image twice gave different archives")
	}
}

func TestParseBinaries(t *testing.T) {
	if _, err := parseBinaries([]string{"linux/amd64=bin"}); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]string{nil, {"linux=bin"}, {"linux/amd64"}, {"/amd64=bin"}, {"linux/amd64="}} {
		if _, err := parseBinaries(bad); err == nil {
			t.Errorf("parseBinaries(%q) accepted", bad)
		}
	}
}

func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readTar(t, f)
}

func readTar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

// blob returns the blob of digest, checking that its content has it.
func blob(t *testing.T, files map[string][]byte, digest string) []byte {
	t.Helper()
	alg, hexsum, _ := strings.Cut(digest, ":")
	b, ok := files["blobs/"+alg+"/"+hexsum]
	if !ok {
		t.Fatalf("no blob %s", digest)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexsum {
		t.Fatalf("blob %s has digest sha256:%x", digest, sum)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
