package redis_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/internal/redislocal"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// rediss:// reaches a redis-server's TLS port, checking its certificate:
// against a private CA given with ?ca=, and refused against the system's
// roots, which do not know that CA.
func TestTLS(t *testing.T) {
	if serverURL == "" {
		t.Skip(redislocal.Help)
	}
	files := newCertificates(t)
	srv, err := redislocal.StartTLS(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ctx := context.Background()

	if s, err := redis.Open(ctx, srv.URL); err == nil {
		_ = s.Close()
		t.Fatalf("Open(%s) without the CA succeeded; want a certificate error", srv.URL)
	}
	s, err := redis.Open(ctx, srv.URL+"?ca="+files.CA)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := bucket.Params{Capacity: 1000, Amount: 1000, Period: 1000}
	req := &store.ConsumeRequest{Now: 1_700_000_000_000, Buckets: []store.BucketRequest{{
		Key: store.BucketKey{Entity: "e", Resource: "api"}, Limits: []store.LimitRequest{{Name: "rps", Params: p, Check: true, Amount: 1000}},
	}}}
	if ok, err := s.Consume(ctx, "tls", req); !ok || err != nil {
		t.Fatalf("Consume over TLS = %v, %v", ok, err)
	}
	if ok, err := s.Consume(ctx, "tls", req); ok || err != nil {
		t.Fatalf("second Consume over TLS = %v, %v; want refused", ok, err)
	}
}

// rediss+cluster:// reaches a Cluster whose nodes serve TLS, following its
// slots over TLS: buckets of namespaces in different slots, a cascade in
// one, each decided exactly.
func TestTLSCluster(t *testing.T) {
	if serverURL == "" {
		t.Skip(redislocal.Help)
	}
	files := newCertificates(t)
	c, err := redislocal.StartClusterTLS(context.Background(), 3, files)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	ctx := context.Background()
	s, err := redis.Open(ctx, c.URL+"?ca="+files.CA)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := bucket.Params{Capacity: 1000, Amount: 1000, Period: 1000}
	limit := []store.LimitRequest{{Name: "rps", Params: p, Check: true, Amount: 1000}}
	req := &store.ConsumeRequest{Now: 1_700_000_000_000, Buckets: []store.BucketRequest{
		{Key: store.BucketKey{Entity: "key", Resource: "api"}, Limits: limit},
		{Key: store.BucketKey{Entity: "org", Resource: "api"}, Limits: limit},
	}}
	// Namespace ids hash to different slots, so to different nodes.
	for _, ns := range []string{"ns-a", "ns-b", "ns-c", "ns-d", "ns-e", "ns-f"} {
		if ok, err := s.Consume(ctx, ns, req); !ok || err != nil {
			t.Fatalf("%s: Consume over TLS = %v, %v", ns, ok, err)
		}
		if ok, err := s.Consume(ctx, ns, req); ok || err != nil {
			t.Fatalf("%s: second Consume over TLS = %v, %v; want refused", ns, ok, err)
		}
	}
}

// The parameters of a store URL are checked.
func TestURLParameters(t *testing.T) {
	for _, u := range []string{
		"redis://127.0.0.1:6379?ca=/etc/ssl/ca.pem", // ca without TLS
		"rediss://127.0.0.1:6379?timeout=1s",        // unknown
		"rediss://127.0.0.1:6379?ca=/nonexistent/ca.pem",
	} {
		if _, err := redis.ClientOption(u); err == nil {
			t.Errorf("ClientOption(%q) = nil error", u)
		}
	}
}

// newCertificates writes a CA and a certificate for 127.0.0.1 signed by
// it, in PEM files of a temporary directory. The certificate also
// authenticates clients: a Cluster's nodes present it to each other.
func newCertificates(t *testing.T) redislocal.TLSFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tollgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := redislocal.TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server.key")}
	writePEM(t, f.CA, "CERTIFICATE", caDER)
	writePEM(t, f.Cert, "CERTIFICATE", leafDER)
	writePEM(t, f.Key, "EC PRIVATE KEY", keyDER)
	return f
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
