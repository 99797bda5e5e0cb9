package check_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tollgate-rl/tollgate/deploy/helm/check"
)

// TestRenderedServerAnswers runs the embedded chart's server container as
// rendered, on this machine: the mounts become temporary directories
// (the keys Secret's items written where the pod would see them), the
// listen address a free loopback port. The server must start with the
// rendered keys file, answer its probes' paths with 200, serve /metrics
// without a key (the ServiceMonitor sends none), and refuse /v1 without one.
func TestRenderedServerAnswers(t *testing.T) {
	bin := tollgateBin(t)
	m, errs := check.Decode(mustRender(t, "embedded.yaml"))
	if len(errs) > 0 || len(m.StatefulSets) != 1 {
		t.Fatalf("decode: %v, %d StatefulSets", errs, len(m.StatefulSets))
	}
	pod := m.StatefulSets[0].Spec.Template.Spec
	c := pod.Containers[0]
	root := t.TempDir()
	mounts := map[string]string{} // mountPath -> local directory
	for _, vm := range c.VolumeMounts {
		dir := filepath.Join(root, vm.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		mounts[vm.MountPath] = dir
		writeSecretItems(t, m, pod.Volumes, vm.Name, dir)
	}
	local := func(s string) string {
		for from, to := range mounts {
			s = strings.ReplaceAll(s, from+"/", to+"/")
		}
		return s
	}
	// The rendered host (beyond loopback, where the server refuses to
	// start without keys) on a free port.
	port := freePort(t)
	var args []string
	for _, a := range c.Args {
		if host, ok := strings.CutPrefix(a, "--addr="); ok {
			h, _, _ := net.SplitHostPort(host)
			a = "--addr=" + net.JoinHostPort(h, port)
		}
		args = append(args, local(a))
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_SERVER=")
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+local(e.Value))
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	base := "http://" + net.JoinHostPort("127.0.0.1", port)
	waitUp(t, base+c.LivenessProbe.HTTPGet.Path, exited, func() string { return fmt.Sprintf("%v\n%s", waitErr, out.String()) })
	for path, want := range map[string]int{
		c.ReadinessProbe.HTTPGet.Path:               http.StatusOK,
		c.LivenessProbe.HTTPGet.Path:                http.StatusOK,
		m.ServiceMonitors[0].Spec.Endpoints[0].Path: http.StatusOK,
		"/v1/namespaces":                            http.StatusUnauthorized,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// writeSecretItems writes the items of the volume's Secret, as rendered,
// into dir as the kubelet would.
func writeSecretItems(t *testing.T, m *check.Manifest, vols []corev1.Volume, name, dir string) {
	t.Helper()
	for _, v := range vols {
		if v.Name != name || v.Secret == nil {
			continue
		}
		for _, s := range m.Secrets {
			if s.Name != v.Secret.SecretName {
				continue
			}
			for _, it := range v.Secret.Items {
				if err := os.WriteFile(filepath.Join(dir, it.Path), s.Data[it.Key], 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// waitUp polls url until it answers 200, the server exits (exited is
// closed; why tells how), or 30 s pass.
func waitUp(t *testing.T, url string, exited <-chan struct{}, why func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("the server exited: %s", why())
		default:
		}
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within 30 s", url)
}
